"""The login handoff's Frontdoor side: send the browser to the company, take its answer.

:func:`start_login` signs a login request with the tenant's current issuer key and
remembers its ``jti`` in Redis; :func:`finish_login` verifies the company's signed
response (its keys from the SSRF-safe fetcher, cached briefly in Redis, or the uploaded
``public_jwk``) and consumes the response's ``jti`` and the request's ``jti`` once each.
The rules of both messages are :mod:`frontdoor_protocol.login_handoff` (ADR 0002).

Redis holds (hot, disposable): ``login:req:{tenant}:{jti}`` until the request can no
longer be answered, ``login:resp:{tenant}:{hash}`` until the response has expired,
``login:jwks:{tenant}:{hash}`` (the fetched JWKS) for :data:`JWKS_CACHE_TTL` seconds, and
a marker that limits refetches on an unknown ``kid`` to one per
:data:`JWKS_REFETCH_INTERVAL` seconds. When Redis cannot answer, the handoff fails closed.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Final
from urllib.parse import urlencode, urlsplit

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Invalid, Unavailable
from frontdoor_core.outbound import FetchError, SafeFetcher
from frontdoor_core.redis_keys import shard
from frontdoor_protocol.login_handoff import (
    DEFAULT_LOGIN_SKEW,
    MAX_LOGIN_LIFETIME,
    LoginHandoffError,
    LoginHandoffReason,
    LoginResponse,
    build_login_request_claims,
    login_key_set,
    login_origin,
    login_public_key,
    sign_login_request,
    verify_login_response,
)
from joserfc.jwk import KeySet

from .credentials.key_encryption import Kek
from .issuer_settings import LoginConnection, get_settings
from .signing_keys import load_signer

__all__ = [
    "JWKS_CACHE_TTL",
    "JWKS_REFETCH_INTERVAL",
    "REQUEST_TTL",
    "LoginFailureReason",
    "LoginHandoffFailed",
    "LoginUrl",
    "finish_login",
    "start_login",
]

REQUEST_TTL: Final = MAX_LOGIN_LIFETIME + DEFAULT_LOGIN_SKEW
"""Seconds a request may be answered: its lifetime plus the skew the company tolerates."""
JWKS_CACHE_TTL: Final = 300
"""Seconds a company's fetched JWKS is reused."""
JWKS_REFETCH_INTERVAL: Final = 30
"""Least seconds between two refetches caused by an unknown ``kid`` (GUIDE-keys-02)."""


class LoginFailureReason(StrEnum):
    """Why a handoff failed beyond the message's own checks (:class:`LoginHandoffReason`)."""

    NOT_CONFIGURED = "not_configured"
    """The tenant has no ``login`` setting."""
    KEYS_UNAVAILABLE = "keys_unavailable"
    """The company's JWKS could not be fetched, or holds no usable key."""
    REPLAYED = "replayed"
    """This response was already used."""
    UNKNOWN_REQUEST = "unknown_request"
    """The request was already answered, has expired, or was never issued for this tenant."""


class LoginHandoffFailed(Invalid):
    """The handoff cannot go on; ``reason`` says why (stable, safe to log, names no value).

    Attributes:
        reason: A :class:`LoginHandoffReason` (the response's checks) or a
            :class:`LoginFailureReason`.
    """

    def __init__(self, reason: LoginHandoffReason | LoginFailureReason) -> None:
        super().__init__("login_failed", "The sign-in at the company could not be completed; start again.")
        self.reason = reason


class LoginUrl(str):
    """The company login URL with ``?request=<JWT>``; ``request_jti`` is the request's ``jti``.

    It is the URL string itself; keep ``request_jti`` in the browser's flow state and pass
    it to :func:`finish_login` as ``expected_request_jti``.
    """

    __slots__ = ("request_jti",)
    request_jti: str

    def __new__(cls, url: str, request_jti: str) -> LoginUrl:
        value = super().__new__(cls, url)
        value.request_jti = request_jti
        return value


def _digest(value: str) -> str:
    # jti values and URLs are chosen by others: keep keys short and uniform.
    return hashlib.sha256(value.encode()).hexdigest()[:40]


def _request_key(tenant_id: str, jti: str) -> str:
    return f"login:req:{shard(tenant_id)}:{_digest(jti)}"


def _response_key(tenant_id: str, jti: str) -> str:
    return f"login:resp:{shard(tenant_id)}:{_digest(jti)}"


def _jwks_key(tenant_id: str, jwks_uri: str) -> str:
    return f"login:jwks:{shard(tenant_id)}:{_digest(jwks_uri)}"


def _unavailable() -> Unavailable:
    return Unavailable("login_state_unavailable", "Temporarily unavailable; retry shortly.", retry_after=5)


async def _connection(conn: asyncpg.Connection, tenant_id: str) -> LoginConnection:
    login = (await get_settings(conn, tenant_id)).settings.login
    if login is None or login.type != "handoff":  # an oidc connection signs in elsewhere
        raise LoginHandoffFailed(LoginFailureReason.NOT_CONFIGURED)
    return login


async def start_login(
    conn: asyncpg.Connection,
    kek: Kek,
    tenant_id: str,
    *,
    issuer: str,
    return_to: str,
    agent_name: str,
    scopes: Iterable[str],
    now: datetime,
    redis: aioredis.Redis,
) -> LoginUrl:
    """The URL to send the browser to: the company's login page with a signed request.

    Args:
        conn: A connection (reads the settings and the tenant's signing key).
        kek: The key-encryption key that opens the signing key.
        tenant_id: The tenant.
        issuer: The tenant's issuer identifier: ``iss``.
        return_to: ``{issuer}/login/callback``.
        agent_name: The agent's display name, shown by the company's page.
        scopes: The scopes being asked.
        now: The current time.
        redis: Where the request's one-use ``jti`` is kept for :data:`REQUEST_TTL` seconds.

    Returns:
        ``login.url?request=<JWT>``, carrying the request's ``jti`` as ``request_jti``.

    Raises:
        LoginHandoffFailed: ``not_configured``.
        Unavailable: Redis could not store the ``jti``.
        ValueError: For arguments no request may carry (see the protocol builder).
    """
    login = await _connection(conn, tenant_id)
    signer = await load_signer(conn, tenant_id, kek, now)
    jti = secrets.token_urlsafe(32)
    claims = build_login_request_claims(
        issuer=issuer,
        login_url=login.url,
        return_to=return_to,
        agent_name=agent_name,
        scopes=scopes,
        jti=jti,
        now=int(now.timestamp()),
    )
    token = sign_login_request(claims, signer.key, signer.kid)
    try:
        await redis.set(_request_key(tenant_id, jti), b"1", ex=REQUEST_TTL)
    except Exception:
        raise _unavailable() from None
    return LoginUrl(f"{login.url}?{urlencode({'request': token})}", jti)


async def finish_login(
    conn: asyncpg.Connection,
    tenant_id: str,
    *,
    issuer: str,
    response_jwt: str,
    expected_request_jti: str,
    now: datetime,
    redis: aioredis.Redis,
    fetcher: SafeFetcher,
) -> str:
    """Verify the company's login response and use it up; return the account ID.

    Args:
        conn: A connection (reads the settings).
        tenant_id: The tenant.
        issuer: The tenant's issuer identifier: the response's ``aud``.
        response_jwt: The ``response`` parameter posted to ``{issuer}/login/callback``.
        expected_request_jti: The ``jti`` of the request this browser was sent with (from
            its flow state, never from the request itself).
        now: The current time.
        redis: The one-use store and the JWKS cache.
        fetcher: The SSRF-safe fetcher for the company's ``jwks_uri``.

    Returns:
        The company's account ID for the user who signed in.

    Raises:
        LoginHandoffFailed: With the reason; nothing about the response is echoed.
        Unavailable: Redis could not answer (fail closed).
    """
    login = await _connection(conn, tenant_id)
    at = int(now.timestamp())
    response = await _verified(
        login, tenant_id, issuer=issuer, token=response_jwt, request_jti=expected_request_jti, at=at, redis=redis,
        fetcher=fetcher,
    )
    ttl = max(response.exp + DEFAULT_LOGIN_SKEW - at, 1)
    try:
        async with redis.pipeline(transaction=True) as pipe:
            pipe.set(_response_key(tenant_id, response.jti), b"1", nx=True, ex=ttl)
            pipe.delete(_request_key(tenant_id, expected_request_jti))
            first_use, pending = await pipe.execute()
    except Exception:
        raise _unavailable() from None
    if not first_use:
        raise LoginHandoffFailed(LoginFailureReason.REPLAYED)
    if not pending:
        raise LoginHandoffFailed(LoginFailureReason.UNKNOWN_REQUEST)
    return response.account_id


async def _verified(
    login: LoginConnection,
    tenant_id: str,
    *,
    issuer: str,
    token: str,
    request_jti: str,
    at: int,
    redis: aioredis.Redis,
    fetcher: SafeFetcher,
) -> LoginResponse:
    origin = login_origin(login.url)

    def verify(keys: KeySet) -> LoginResponse:
        return verify_login_response(
            token, keys=keys, expected_issuer=origin, audience=issuer, expected_request_jti=request_jti, now=at
        )

    try:
        return verify(await _keys(login, tenant_id, redis, fetcher))
    except LoginHandoffError as exc:
        if exc.reason is not LoginHandoffReason.UNKNOWN_KEY or login.jwks_uri is None:
            raise LoginHandoffFailed(exc.reason) from None
    fresh = await _refetched_keys(login.jwks_uri, tenant_id, redis, fetcher)
    if fresh is None:
        raise LoginHandoffFailed(LoginHandoffReason.UNKNOWN_KEY)
    try:
        return verify(fresh)
    except LoginHandoffError as exc:
        raise LoginHandoffFailed(exc.reason) from None


async def _keys(login: LoginConnection, tenant_id: str, redis: aioredis.Redis, fetcher: SafeFetcher) -> KeySet:
    if login.public_jwk is not None:
        try:
            return KeySet([login_public_key(login.public_jwk)])
        except ValueError:
            raise LoginHandoffFailed(LoginFailureReason.KEYS_UNAVAILABLE) from None
    assert login.jwks_uri is not None  # validate_settings: exactly one of the two
    try:
        cached = await redis.get(_jwks_key(tenant_id, login.jwks_uri))
    except Exception:
        cached = None  # a cache miss; the one-use claims later fail closed
    if cached is not None:
        try:
            return login_key_set(msgspec.json.decode(cached))
        except (msgspec.DecodeError, ValueError):
            pass
    return await _fetch_keys(login.jwks_uri, tenant_id, redis, fetcher)


async def _refetched_keys(jwks_uri: str, tenant_id: str, redis: aioredis.Redis, fetcher: SafeFetcher) -> KeySet | None:
    """Fresh keys after an unknown ``kid``, or ``None`` when a refetch happened just before."""
    try:
        allowed = await redis.set(f"login:jwks-refetch:{shard(tenant_id)}:{_digest(jwks_uri)}", b"1", nx=True,
                                  ex=JWKS_REFETCH_INTERVAL)
    except Exception:
        raise _unavailable() from None
    if not allowed:
        return None
    return await _fetch_keys(jwks_uri, tenant_id, redis, fetcher)


async def _fetch_keys(jwks_uri: str, tenant_id: str, redis: aioredis.Redis, fetcher: SafeFetcher) -> KeySet:
    try:
        result = await fetcher.fetch(jwks_uri)
    except FetchError:
        raise LoginHandoffFailed(LoginFailureReason.KEYS_UNAVAILABLE) from None
    # The keys vouch for the login page's domain: a redirect off its host is not followed.
    if urlsplit(result.final_url).hostname != urlsplit(jwks_uri).hostname:
        raise LoginHandoffFailed(LoginFailureReason.KEYS_UNAVAILABLE)
    try:
        keys = login_key_set(msgspec.json.decode(result.body))
    except (msgspec.DecodeError, ValueError):
        raise LoginHandoffFailed(LoginFailureReason.KEYS_UNAVAILABLE) from None
    # Caching is an optimisation: the verified keys are used whether or not Redis took them.
    with contextlib.suppress(Exception):
        await redis.set(_jwks_key(tenant_id, jwks_uri), result.body, ex=JWKS_CACHE_TTL)
    return keys
