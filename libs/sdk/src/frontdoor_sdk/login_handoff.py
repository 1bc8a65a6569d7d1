"""Your login page's side of Frontdoor's login handoff (docs/login-handoff.md, ADR 0002).

Frontdoor never sees your users' passwords. It sends the browser to your login page with
``?request=<JWT>``; your page:

1. verifies it with :func:`verify_login_request` (signed by your Frontdoor issuer's key,
   for your login page's origin, fresh, answering to ``{issuer}/login/callback``);
2. authenticates the user its own way;
3. sends the browser back to ``request.return_to`` with a form POST of
   ``response=<JWT>`` made by :func:`build_login_response` and signed with your own
   ES256 key;
4. publishes that key's public part with :func:`login_jwks` at the ``jwks_uri`` you gave
   Frontdoor (or uploads it as ``public_jwk``).

Example::

    issuer_keys = issuer_key_source(ISSUER, http_client)   # once, at start-up

    request = await verify_login_request(
        token, issuer=ISSUER, issuer_keys=issuer_keys, login_origin=ORIGIN, now=datetime.now(UTC))
    ...  # authenticate, show request.agent_name (escaped) and request.scopes
    response = build_login_response(account_id=user.id, request_jti=request.jti, login_origin=ORIGIN,
                                    issuer=ISSUER, key=signing_key, kid=signing_key.kid, now=datetime.now(UTC))
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, cast

import httpx
from frontdoor_protocol.login_handoff import (
    LoginHandoffError,
    LoginHandoffReason,
    LoginRequest,
    build_login_response_claims,
    sign_login_response,
)
from frontdoor_protocol.login_handoff import verify_login_request as _verify_login_request
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet

from frontdoor_sdk.clock import Clock, utc_now
from frontdoor_sdk.jwks_cache import JwksCache

__all__ = [
    "IssuerKeySource",
    "LoginHandoffError",
    "LoginHandoffReason",
    "LoginRequest",
    "build_login_response",
    "issuer_key_source",
    "login_jwks",
    "login_signing_key",
    "verify_login_request",
]

_RESPONSE_LIFETIME = 60


class IssuerKeySource(Protocol):
    """Where your Frontdoor issuer's public keys come from (:func:`issuer_key_source`)."""

    async def keys(self) -> KeySet:
        """The cached keys (fetched when missing or old)."""
        ...

    async def refresh_for_unknown_kid(self) -> KeySet | None:
        """Fresh keys after an unknown ``kid``, or ``None`` when fetched just before."""
        ...


def issuer_key_source(issuer: str, http: httpx.AsyncClient, *, clock: Clock = utc_now) -> IssuerKeySource:
    """A cache of ``{issuer}/jwks.json``: create one at start-up and share it.

    Args:
        issuer: Your Frontdoor issuer, ``auth.issuer`` in ``poppy.json``.
        http: The client to fetch with (you own and close it).
        clock: The time source.

    Returns:
        A key source refetching after an hour, or on an unknown ``kid`` at most every 30 s.
    """
    return JwksCache(f"{issuer}/jwks.json", http, clock)


async def verify_login_request(
    request_jwt: str,
    *,
    issuer: str,
    issuer_keys: KeySet | IssuerKeySource,
    login_origin: str,
    now: datetime,
) -> LoginRequest:
    """Verify the ``request`` parameter your login page was opened with.

    Args:
        request_jwt: The ``request`` query parameter, as received.
        issuer: Your Frontdoor issuer identifier (``iss`` must equal it).
        issuer_keys: Your issuer's keys, or a :func:`issuer_key_source` (an unknown ``kid``
            refetches them once).
        login_origin: Your login page's origin, e.g. ``https://shop.example``: the ``aud``.
        now: The current time, timezone-aware.

    Returns:
        ``return_to`` (always ``{issuer}/login/callback``), ``agent_name`` (the agent's
        words: escape it), ``scopes`` and ``jti`` (echo it in the response).

    Raises:
        LoginHandoffError: The request is not acceptable; ``reason`` says why. Show the
            user a "start again from your agent" page; never sign a response.
        JwksUnavailable: The issuer's keys could not be fetched (answer 503).
    """
    at = int(now.timestamp())
    if isinstance(issuer_keys, KeySet):
        return _verify_login_request(request_jwt, keys=issuer_keys, issuer=issuer, login_origin=login_origin, now=at)
    try:
        keys = await issuer_keys.keys()
        return _verify_login_request(request_jwt, keys=keys, issuer=issuer, login_origin=login_origin, now=at)
    except LoginHandoffError as exc:
        if exc.reason is not LoginHandoffReason.UNKNOWN_KEY:
            raise
        fresh = await issuer_keys.refresh_for_unknown_kid()
        if fresh is None:
            raise
    return _verify_login_request(request_jwt, keys=fresh, issuer=issuer, login_origin=login_origin, now=at)


def build_login_response(
    *,
    account_id: str,
    request_jti: str,
    login_origin: str,
    issuer: str,
    key: ECKey,
    kid: str,
    now: datetime,
) -> str:
    """The ``response`` JWT telling Frontdoor which of your accounts signed in.

    Post it to the verified request's ``return_to`` as the form field ``response`` (a
    form POST keeps it out of URLs and logs). It lives 60 seconds and is used once.

    Args:
        account_id: Your stable ID for the account (1-256 visible ASCII characters; not
            an email address that can change hands). Agents' calls carry it back to you.
        request_jti: ``LoginRequest.jti`` of the verified request.
        login_origin: Your login page's origin: ``iss``.
        issuer: Your Frontdoor issuer identifier: ``aud``.
        key: Your private EC P-256 key.
        kid: The ``kid`` your published JWKS gives its public part.
        now: The current time, timezone-aware.

    Returns:
        The compact JWT.

    Raises:
        ValueError: For an argument Frontdoor would refuse (a bad account ID, a
            non-origin ``login_origin``, a key that is not a private P-256 key).
    """
    claims = build_login_response_claims(
        account_id=account_id,
        request_jti=request_jti,
        login_origin=login_origin,
        issuer=issuer,
        jti=secrets.token_urlsafe(32),
        now=int(now.timestamp()),
        lifetime=_RESPONSE_LIFETIME,
    )
    return sign_login_response(claims, key, kid)


def login_jwks(*keys: ECKey) -> dict[str, Any]:
    """The JWKS document to publish at your ``jwks_uri`` (public parts only).

    Publish a new key here before signing with it, and keep the old one a few minutes
    after: Frontdoor caches your JWKS for up to five minutes and refetches on an unknown
    ``kid``.

    Args:
        keys: Your P-256 signing keys, each with a ``kid``.

    Returns:
        ``{"keys": [...]}`` with ``kty``, ``crv``, ``x``, ``y``, ``kid``, ``use: sig`` and
        ``alg: ES256`` per key; serve it as ``application/json``.

    Raises:
        ValueError: A key is not P-256 or has no ``kid``.
    """
    published: list[dict[str, Any]] = []
    for key in keys:
        if not isinstance(key, ECKey) or key.curve_name != "P-256" or not key.kid:
            raise ValueError("login keys are EC P-256 keys with a kid")
        public = {name: value for name, value in key.as_dict(private=False).items() if name in {"kty", "crv", "x", "y"}}
        published.append({**public, "kid": key.kid, "use": "sig", "alg": "ES256"})
    return {"keys": published}


def login_signing_key(jwk: Mapping[str, Any] | None = None) -> ECKey:
    """Your ES256 key for login responses: imported from a private JWK, or a new one.

    Keep the key in your secret store; a key generated at every start works only while
    one process serves both your JWKS and your login page.

    Args:
        jwk: A private EC P-256 JWK (``kty``, ``crv``, ``x``, ``y``, ``d``, optional
            ``kid``), or ``None`` to generate a key.

    Returns:
        The private key; its ``kid`` is the JWK's, else its RFC 7638 thumbprint.

    Raises:
        ValueError: ``jwk`` is not a private EC P-256 key.
    """
    if jwk is None:
        key = ECKey.generate_key("P-256")
    else:
        try:
            key = ECKey.import_key(cast(dict[str, str | list[str]], dict(jwk)))
        except (JoseError, ValueError, TypeError, KeyError):
            raise ValueError("not an EC P-256 private JWK") from None
        if key.curve_name != "P-256" or not key.is_private:
            raise ValueError("not an EC P-256 private JWK")
        if key.kid:
            return key
    return ECKey.import_key({**key.as_dict(private=True), "kid": key.thumbprint()})
