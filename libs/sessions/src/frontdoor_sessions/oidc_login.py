"""Signing a user in at the tenant's OpenID Provider: the authorization code flow.

The relying-party side of OpenID Connect Core 1.0 §3.1 for a tenant whose ``login`` is
``oidc``, used by the sign-in pages instead of the signed handoff:

- :func:`start_oidc_login` makes a fresh ``state``, ``nonce`` and PKCE ``S256`` verifier
  (RFC 7636), keeps them server-side under the SHA-256 of ``state`` for
  :data:`STATE_TTL` seconds, bound to the browser's sign-in flow, and returns the IdP's
  authorization URL;
- :func:`finish_oidc_login` takes the IdP's redirect: ``state`` is used up once (GETDEL),
  must belong to this browser's flow, the RFC 9207 ``iss`` must be the IdP's (required
  when the IdP advertises it); an ``error`` is the IdP's answer (`OidcLoginDenied`);
  the code is redeemed at the token endpoint with the verifier and the client secret
  (``client_secret_basic`` or ``client_secret_post``), and the ID token is checked
  (`verify_id_token`, keys refetched once on an unknown ``kid``), optionally completed by
  userinfo. The configured claim becomes the company's account ID, and the ID token's
  ``sid`` (the user's session at the IdP), when present, is kept as its `idp_session_hash`
  with the sign-in this login completes, for Back-Channel Logout.

`check_client_credentials` is the dashboard's "test connection" of the client credentials
without a user: a random, never issued code redeemed with the configured client
authentication tells ``invalid_client`` (wrong credentials) from ``invalid_grant`` (right
credentials, RFC 6749 §5.2).

Nothing secret is logged or echoed: failures carry a stable :class:`OidcFailure` only.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Invalid, Unavailable
from frontdoor_core.outbound import FetchError, SafeFetcher
from frontdoor_core.redis_keys import shard
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_tenancy.issuer_settings import LoginConnection
from frontdoor_tenancy.oidc_client_key import load_client_key
from frontdoor_tenancy.oidc_connection import load_client_secret
from joserfc.jwk import ECKey

from .oidc_client_assertion import JWT_BEARER_ASSERTION, client_assertion
from .oidc_id_token import IdTokenError, IdTokenReason, idp_session_hash, session_id_claim, verify_id_token
from .oidc_provider import ProviderMetadata, ProviderUnavailable, discover, provider_keys, refetched_keys

__all__ = [
    "STATE_TTL",
    "TEST_FLOW_PREFIX",
    "CredentialsCheck",
    "CredentialsVerdict",
    "OidcAccount",
    "OidcFailure",
    "OidcLoginDenied",
    "OidcLoginFailed",
    "account_id_from_claims",
    "check_client_credentials",
    "finish_oidc_login",
    "is_test_state",
    "start_oidc_login",
]

STATE_TTL: Final = 600
"""Seconds an authorization request may be answered (the sign-in flow's own lifetime)."""
_ACCOUNT_ID = re.compile(r"^[\x21-\x7e]{1,255}$")
_IDP_ERROR = re.compile(r"^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$")  # RFC 6749 §4.1.2.1 error charset


class OidcFailure(StrEnum):
    """Why the IdP's answer did not sign anyone in (stable, safe to log, names no value)."""

    UNKNOWN_STATE = "unknown_state"
    """No pending request has this ``state``: used already, expired, or never issued."""
    OTHER_BROWSER = "other_browser"
    """The ``state`` belongs to another browser's sign-in."""
    CONNECTION_CHANGED = "connection_changed"
    """The login connection changed since the request was sent."""
    ISSUER = "issuer"
    """The response's ``iss`` is not the IdP's, or is missing though the IdP sends it (RFC 9207)."""
    NO_CODE = "no_code"
    TOKEN_REFUSED = "token_refused"
    """The token endpoint refused the code (used, expired, PKCE or redirect mismatch)."""
    INVALID_CLIENT = "invalid_client"
    """The token endpoint refused Frontdoor's client credentials (a wrong secret)."""
    PROVIDER_DOWN = "provider_down"
    """The IdP did not answer, or answered what is not OpenID Connect."""
    ID_TOKEN = "id_token"
    """The ID token failed a check; ``check`` is the `IdTokenReason`."""
    USERINFO = "userinfo"
    NO_ACCOUNT = "no_account"
    """The configured claim is missing, not verified (email) or not a usable account ID."""


class OidcLoginFailed(Invalid):
    """The sign-in at the IdP cannot be completed; ``reason`` (and ``check``) say why."""

    def __init__(self, reason: OidcFailure, check: str | None = None) -> None:
        super().__init__("login_failed", "The sign-in at the company could not be completed; start again.")
        self.reason = reason
        self.check = check


class OidcLoginDenied(Exception):
    """The IdP answered with an error (the user cancelled, or it refused): ``error`` is its code."""

    def __init__(self, error: str) -> None:
        super().__init__(f"identity provider answered {error}")
        self.error = error


class OidcAccount(msgspec.Struct, frozen=True, kw_only=True):
    """Whom the IdP vouched for.

    Attributes:
        account_id: The company's account ID (the configured claim).
        idp_session: `idp_session_hash` of the ID token's ``iss`` and ``sid``, or None when
            the ID token named no session.
    """

    account_id: str
    idp_session: str | None = None


class _Pending(msgspec.Struct, frozen=True, kw_only=True):
    flow_id: str
    verifier: str
    nonce: str
    issuer: str
    client_id: str


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _state_key(tenant_id: str, state: str) -> str:
    return f"oidc:state:{shard(tenant_id)}:{hashlib.sha256(state.encode()).hexdigest()}"


def _unavailable() -> Unavailable:
    return Unavailable("login_state_unavailable", "Temporarily unavailable; retry shortly.", retry_after=5)


def _with_query(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


async def start_oidc_login(login: LoginConnection, *, tenant_id: str, flow_id: str, redirect_uri: str,
                           fetcher: SafeFetcher, redis: aioredis.Redis) -> str:
    """The IdP's authorization URL for the browser of ``flow_id``.

    Raises:
        ProviderUnavailable: Discovery failed.
        Unavailable: Redis could not keep the request.
    """
    assert login.issuer is not None and login.client_id is not None  # validate_settings
    meta = await discover(login.issuer, tenant_id=tenant_id, fetcher=fetcher, redis=redis)
    state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    pending = _Pending(flow_id=flow_id, verifier=verifier, nonce=nonce, issuer=login.issuer, client_id=login.client_id)
    try:
        await redis.set(_state_key(tenant_id, state), msgspec.json.encode(pending), ex=STATE_TTL)
    except Exception:
        raise _unavailable() from None
    scope = "openid email" if login.account_claim == "email" else "openid"
    return _with_query(meta.authorization_endpoint, {
        "response_type": "code", "client_id": login.client_id, "redirect_uri": redirect_uri, "scope": scope,
        "state": state, "nonce": nonce,
        "code_challenge": _b64url(hashlib.sha256(verifier.encode("ascii")).digest()), "code_challenge_method": "S256",
    })


def account_id_from_claims(claims: Mapping[str, Any], account_claim: str) -> str:
    """The company's account ID: ``sub``, or ``email`` only when ``email_verified`` is true.

    Raises:
        OidcLoginFailed: ``no_account``.
    """
    if account_claim == "email":
        value = claims.get("email") if claims.get("email_verified") is True else None
    else:
        value = claims.get("sub")
    if not isinstance(value, str) or not _ACCOUNT_ID.match(value):
        raise OidcLoginFailed(OidcFailure.NO_ACCOUNT)
    return value


async def _take_pending(redis: aioredis.Redis, tenant_id: str, state: str) -> _Pending | None:
    if not state or len(state) > 512:
        return None
    try:
        raw = await redis.getdel(_state_key(tenant_id, state))
    except Exception:
        raise _unavailable() from None
    return None if raw is None else msgspec.json.decode(raw, type=_Pending)


TEST_FLOW_PREFIX: Final = "console-test:"
"""The ``flow_id`` prefix of the dashboard's test sign-in: the console's session, no sign-in flow."""


async def is_test_state(redis: aioredis.Redis, tenant_id: str, state: str) -> bool:
    """Whether ``state`` is a pending request of the dashboard's test sign-in (read, not used up).

    The issuer's ``/oidc/callback`` hands such an answer to the console, which finishes it
    with `finish_oidc_login` bound to the admin's console session.
    """
    if not state or len(state) > 512:
        return False
    try:
        raw = await redis.get(_state_key(tenant_id, state))
        return raw is not None and msgspec.json.decode(raw, type=_Pending).flow_id.startswith(TEST_FLOW_PREFIX)
    except Exception:
        return False


async def finish_oidc_login(pool: asyncpg.Pool, kek: Kek, login: LoginConnection, *, tenant_id: str,
                            params: Mapping[str, str], flow_id: str, redirect_uri: str, now: int,
                            fetcher: SafeFetcher, redis: aioredis.Redis) -> OidcAccount:
    """Check the IdP's redirect to ``redirect_uri`` and return the account it vouches for.

    Args:
        pool: Reads the client secret or key (a connection is held only for that, never
            while the IdP is being waited for).
        kek: Opens it.
        login: The tenant's current ``oidc`` connection.
        tenant_id: The tenant.
        params: The redirect's query (``code``, ``state``, ``iss``, or ``error``).
        flow_id: This browser's sign-in flow (its cookie): the ``state`` must be its own.
        redirect_uri: ``{issuer}/oidc/callback``, as sent in the request.
        now: The current time, seconds since the epoch.
        fetcher: The SSRF-safe fetcher.
        redis: The one-use ``state`` store and the IdP caches.

    Raises:
        OidcLoginFailed: With the reason.
        OidcLoginDenied: The IdP answered ``error`` (after ``state`` and ``iss`` checked out).
        Unavailable: Redis could not answer.
    """
    pending = await _take_pending(redis, tenant_id, params.get("state", ""))
    if pending is None:
        raise OidcLoginFailed(OidcFailure.UNKNOWN_STATE)
    if not secrets.compare_digest(pending.flow_id, flow_id):
        raise OidcLoginFailed(OidcFailure.OTHER_BROWSER)
    if pending.issuer != login.issuer or pending.client_id != login.client_id:
        raise OidcLoginFailed(OidcFailure.CONNECTION_CHANGED)
    try:
        meta = await discover(pending.issuer, tenant_id=tenant_id, fetcher=fetcher, redis=redis)
    except ProviderUnavailable:
        raise OidcLoginFailed(OidcFailure.PROVIDER_DOWN) from None
    iss = params.get("iss")
    # RFC 9207 §2.4: a mix-up is caught by iss; required when the IdP says it sends it.
    if (iss is not None and iss != meta.issuer) or (iss is None and meta.authorization_response_iss_parameter_supported):
        raise OidcLoginFailed(OidcFailure.ISSUER)
    error = params.get("error")
    if error is not None:
        raise OidcLoginDenied(error if _IDP_ERROR.match(error) else "invalid_response")
    code = params.get("code")
    if not code or len(code) > 2048:
        raise OidcLoginFailed(OidcFailure.NO_CODE)
    async with pool.acquire() as conn:
        secret = await load_client_secret(conn, kek, tenant_id)
        client_key = (await load_client_key(conn, kek, tenant_id, now=datetime.fromtimestamp(now, UTC))
                      if login.token_endpoint_auth_method == "private_key_jwt" else None)
    tokens = await _redeem(meta, login, secret or "", code=code, verifier=pending.verifier,
                           redirect_uri=redirect_uri, fetcher=fetcher, client_key=client_key, now=now)
    id_token, access_token = tokens.get("id_token"), tokens.get("access_token")
    if not isinstance(id_token, str):
        raise OidcLoginFailed(OidcFailure.PROVIDER_DOWN)
    claims = await _verified_claims(meta, pending, id_token, access_token if isinstance(access_token, str) else None,
                                    tenant_id=tenant_id, now=now, fetcher=fetcher, redis=redis)
    sid = session_id_claim(claims)  # from the ID token itself, never userinfo
    if login.userinfo and meta.userinfo_endpoint is not None and isinstance(access_token, str):
        claims = {**await _userinfo(meta.userinfo_endpoint, access_token, str(claims["sub"]), fetcher), **claims}
    return OidcAccount(account_id=account_id_from_claims(claims, login.account_claim),
                       idp_session=idp_session_hash(meta.issuer, sid) if sid is not None else None)


async def _token_request(meta: ProviderMetadata, login: LoginConnection, secret: str, form: dict[str, str], *,
                         fetcher: SafeFetcher, client_key: ECKey | None, now: int) -> tuple[int, Any]:
    """POST ``form`` to the token endpoint with the configured client authentication: (status, JSON or None).

    Raises:
        OidcLoginFailed: ``invalid_client`` (no client key for ``private_key_jwt``) or ``provider_down``.
    """
    assert login.client_id is not None
    form = dict(form)
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    if login.token_endpoint_auth_method == "private_key_jwt":
        if client_key is None:
            raise OidcLoginFailed(OidcFailure.INVALID_CLIENT)
        form.update(client_id=login.client_id, client_assertion_type=JWT_BEARER_ASSERTION,
                    client_assertion=client_assertion(client_key, client_id=login.client_id,
                                                      audience=meta.token_endpoint, now=now))
    elif login.token_endpoint_auth_method == "client_secret_post":
        form.update(client_id=login.client_id, client_secret=secret)
    else:  # RFC 6749 §2.3.1: both form-urlencoded before the Basic encoding
        pair = f"{quote(login.client_id, safe='')}:{quote(secret, safe='')}".encode("ascii")
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    try:
        answer = await fetcher.post(meta.token_endpoint, urlencode(form).encode("ascii"), headers=headers)
    except FetchError:
        raise OidcLoginFailed(OidcFailure.PROVIDER_DOWN) from None
    try:
        body = msgspec.json.decode(answer.body) if not answer.truncated else None
    except msgspec.DecodeError:
        body = None
    return answer.status, body


async def _redeem(meta: ProviderMetadata, login: LoginConnection, secret: str, *, code: str, verifier: str,
                  redirect_uri: str, fetcher: SafeFetcher, client_key: ECKey | None = None,
                  now: int = 0) -> dict[str, Any]:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "code_verifier": verifier}
    status, body = await _token_request(meta, login, secret, form, fetcher=fetcher, client_key=client_key, now=now)
    if status == 200 and isinstance(body, dict):
        return body
    error = body.get("error") if isinstance(body, dict) else None
    if status in (400, 401) and error == "invalid_client":
        raise OidcLoginFailed(OidcFailure.INVALID_CLIENT)
    if status == 400 and isinstance(error, str):
        raise OidcLoginFailed(OidcFailure.TOKEN_REFUSED)
    raise OidcLoginFailed(OidcFailure.PROVIDER_DOWN)


class CredentialsVerdict(StrEnum):
    """What the IdP's token endpoint said of Frontdoor's client credentials (`check_client_credentials`)."""

    ACCEPTED = "accepted"
    """``invalid_grant``: the client authenticated; only the (never issued) code was refused."""
    REJECTED = "rejected"
    """``invalid_client``: the client ID, secret or client key is not what the IdP has."""
    NO_CLIENT_KEY = "no_client_key"
    """``private_key_jwt`` without a signing client key at Frontdoor."""
    UNREACHABLE = "unreachable"
    """The token endpoint did not answer."""
    OTHER = "other"
    """Any other answer: ``error`` is the IdP's error code (or None), ``status`` its HTTP status."""


class CredentialsCheck(msgspec.Struct, frozen=True, kw_only=True):
    verdict: CredentialsVerdict
    status: int | None = None
    error: str | None = None
    """The IdP's ``error`` code only (RFC 6749 §5.2 charset), never its description."""


async def check_client_credentials(pool: asyncpg.Pool, kek: Kek, login: LoginConnection, meta: ProviderMetadata, *,
                                   tenant_id: str, redirect_uri: str, now: int,
                                   fetcher: SafeFetcher) -> CredentialsCheck:
    """Authenticate at the IdP's token endpoint without a user: redeem a random, never issued code.

    RFC 6749 §5.2: the IdP answers ``invalid_client`` when the client authentication fails and
    ``invalid_grant`` when it succeeds but the code is not valid. The code is fresh random and
    was never issued, so nothing can be redeemed by this request.
    """
    async with pool.acquire() as conn:
        secret = await load_client_secret(conn, kek, tenant_id)
        client_key = (await load_client_key(conn, kek, tenant_id, now=datetime.fromtimestamp(now, UTC))
                      if login.token_endpoint_auth_method == "private_key_jwt" else None)
    if login.token_endpoint_auth_method == "private_key_jwt" and client_key is None:
        return CredentialsCheck(verdict=CredentialsVerdict.NO_CLIENT_KEY)
    form = {"grant_type": "authorization_code", "code": secrets.token_urlsafe(32), "redirect_uri": redirect_uri,
            "code_verifier": secrets.token_urlsafe(48)}
    try:
        status, body = await _token_request(meta, login, secret or "", form, fetcher=fetcher, client_key=client_key,
                                            now=now)
    except OidcLoginFailed:
        return CredentialsCheck(verdict=CredentialsVerdict.UNREACHABLE)
    raw = body.get("error") if isinstance(body, dict) else None
    error = raw if isinstance(raw, str) and _IDP_ERROR.match(raw) else None
    if status in (400, 401) and error == "invalid_client":
        return CredentialsCheck(verdict=CredentialsVerdict.REJECTED, status=status, error=error)
    if status == 400 and error == "invalid_grant":
        return CredentialsCheck(verdict=CredentialsVerdict.ACCEPTED, status=status, error=error)
    return CredentialsCheck(verdict=CredentialsVerdict.OTHER, status=status, error=error)


async def _verified_claims(meta: ProviderMetadata, pending: _Pending, id_token: str, access_token: str | None, *,
                           tenant_id: str, now: int, fetcher: SafeFetcher, redis: aioredis.Redis) -> dict[str, Any]:
    def check(keys: Any) -> dict[str, Any]:
        return verify_id_token(id_token, keys=keys, issuer=meta.issuer, client_id=pending.client_id,
                               nonce=pending.nonce, now=now, algorithms=meta.algorithms(), access_token=access_token)

    try:
        keys = await provider_keys(meta, tenant_id=tenant_id, fetcher=fetcher, redis=redis)
        try:
            return check(keys)
        except IdTokenError as exc:
            if exc.reason is not IdTokenReason.UNKNOWN_KEY:
                raise
        fresh = await refetched_keys(meta, tenant_id=tenant_id, fetcher=fetcher, redis=redis)
        if fresh is None:
            raise IdTokenError(IdTokenReason.UNKNOWN_KEY)
        return check(fresh)
    except ProviderUnavailable:
        raise OidcLoginFailed(OidcFailure.PROVIDER_DOWN) from None
    except IdTokenError as exc:
        raise OidcLoginFailed(OidcFailure.ID_TOKEN, str(exc.reason)) from None


async def _userinfo(endpoint: str, access_token: str, subject: str, fetcher: SafeFetcher) -> dict[str, Any]:
    """The userinfo claims (OIDC Core §5.3; POST with the Bearer token, §5.3.1), same ``sub`` only."""
    try:
        answer = await fetcher.post(endpoint, b"", headers={"Authorization": f"Bearer {access_token}",
                                                            "Accept": "application/json"})
        body = msgspec.json.decode(answer.body)
    except (FetchError, msgspec.DecodeError):
        raise OidcLoginFailed(OidcFailure.USERINFO) from None
    # §5.3.4: a userinfo answer for another subject must not be used.
    if answer.status != 200 or not isinstance(body, dict) or body.get("sub") != subject:
        raise OidcLoginFailed(OidcFailure.USERINFO)
    return body
