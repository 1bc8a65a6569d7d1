"""PAP 1.0 access tokens: RFC 9068 JWTs the tenant's issuer signs for a signed-in agent.

Header ``{"alg": "ES256", "typ": "at+jwt", "kid"}``; claims ``iss``, ``sub`` (the
company's account ID), ``aud`` (the issuer by default, or the RFC 8707 resource asked
for), ``client_id`` (the agent's CIMD URL), ``scope``, ``jti``, ``iat``, ``exp``, ``sgn``
(the sign-in's grant family), ``token_use: "access"`` and ``cnf.jkt`` when DPoP-bound
(ADR 0004 §4). ``token_use`` keeps the two kinds of issuer token apart: a 0.2 Session
Token (``"session"``) is never accepted here, and an access token is never accepted by
:func:`~frontdoor_protocol.session_token.verify_session_token`.

Verification is the issuer-token profile (:mod:`frontdoor_protocol.issuer_jwt`) with an
``aud`` that is a string or an array holding one of the resource's audiences (RFC 9068 §4,
RFC 8707), and a lifetime of at most :data:`MAX_ACCESS_TOKEN_LIFETIME`.

Every refusal is ``invalid_token``: at a resource that is the standard OAuth challenge of
the scheme used, never ``invalid_session`` [S §4].
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal

import msgspec
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import sign_compact_jws
from frontdoor_protocol.errors import ErrorCode
from frontdoor_protocol.issuer_jwt import (
    ISSUER_JWT_ALGORITHM,
    ISSUER_JWT_TYPE,
    check_signing_key,
    decode_issuer_claims,
    verify_issuer_jws,
)
from frontdoor_protocol.jwt_assertion import DEFAULT_CLOCK_SKEW
from frontdoor_protocol.scopes import parse_scope
from frontdoor_protocol.session_token import Confirmation

__all__ = [
    "ACCESS_TOKEN_LIFETIME",
    "MAX_ACCESS_TOKEN_LIFETIME",
    "TOKEN_USE_ACCESS",
    "AccessTokenClaims",
    "mint_access_token",
    "verify_access_token",
]

TOKEN_USE_ACCESS: Final = "access"
ACCESS_TOKEN_LIFETIME: Final = 15 * 60
"""What the issuer mints: 15 minutes (ADR 0004 §4)."""
MAX_ACCESS_TOKEN_LIFETIME: Final = 3600
"""Longest lifetime minted or accepted."""

_INVALID = ErrorCode.INVALID_TOKEN
_NAME = "access token"


class AccessTokenClaims(msgspec.Struct, frozen=True, kw_only=True):
    """The claims of a 1.0 access token.

    Attributes:
        iss: The tenant's issuer.
        sub: The company's account ID for the signed-in user.
        aud: The issuer, a protected resource, or several.
        client_id: The agent's Client ID; must equal the Session's ``iss`` [S §3].
        scope: The granted scopes, space-separated.
        jti: This token's ID.
        iat: Issued at.
        exp: Expiry.
        sgn: The sign-in (grant family) ID, whose revocation ends the token's use.
        cnf: The DPoP key binding, when the token request carried a proof.
        token_use: Always ``"access"``.
    """

    iss: str
    sub: str
    aud: str | list[str]
    client_id: str
    scope: str
    jti: str
    iat: int
    exp: int
    sgn: str
    cnf: Confirmation | None = None
    token_use: Literal["access"] = "access"

    @property
    def jkt(self) -> str | None:
        """The bound key's thumbprint, or ``None`` for a Bearer token."""
        return None if self.cnf is None else self.cnf.jkt

    @property
    def audiences(self) -> tuple[str, ...]:
        """``aud`` as a tuple."""
        return (self.aud,) if isinstance(self.aud, str) else tuple(self.aud)


class _Payload(AccessTokenClaims, frozen=True, kw_only=True):
    # On the wire ``token_use`` is required: a token without it is not an access token.
    token_use: Literal["access"]


def mint_access_token(claims: AccessTokenClaims, key: ECKey, kid: str) -> str:
    """Sign an access token with the issuer's current key.

    Args:
        claims: The claims.
        key: The issuer's private P-256 key.
        kid: Its ``kid`` in the issuer's JWKS.

    Returns:
        The compact JWT.

    Raises:
        ValueError: For empty members, an empty ``aud`` list, a lifetime outside
            1 s..:data:`MAX_ACCESS_TOKEN_LIFETIME`, a malformed scope or a wrong key.
    """
    texts = (claims.iss, claims.sub, claims.client_id, claims.jti, claims.sgn)
    if not all(texts) or not claims.audiences or not all(claims.audiences):
        raise ValueError("iss, sub, aud, client_id, jti and sgn must be non-empty")
    if not 0 < claims.exp - claims.iat <= MAX_ACCESS_TOKEN_LIFETIME:
        raise ValueError("an access token lives between 1 second and 1 hour")
    if claims.scope:
        parse_scope(claims.scope)  # ValueError for a malformed scope
    if claims.cnf is not None and not claims.cnf.jkt:
        raise ValueError("cnf.jkt must be a key thumbprint")
    check_signing_key(key, kid)
    header = {"alg": ISSUER_JWT_ALGORITHM, "typ": ISSUER_JWT_TYPE, "kid": kid}
    return sign_compact_jws(header, msgspec.structs.asdict(claims), key)


def verify_access_token(
    token: str,
    *,
    issuer: str,
    keys: KeySet,
    now: int,
    audiences: Collection[str] | None = None,
    skew: int = DEFAULT_CLOCK_SKEW,
) -> AccessTokenClaims:
    """Verify an access token presented at a resource (RFC 9068 §4).

    The caller then checks that ``client_id`` is the Session's client and that the scheme
    fits ``cnf`` (:func:`~frontdoor_protocol.delegated_request.verify_delegated_request`).

    Args:
        token: The token from ``Authorization``.
        issuer: The tenant's issuer; ``iss`` must equal it.
        keys: The issuer's signing keys (its JWKS).
        now: The current time, in seconds since the epoch.
        audiences: The audiences this resource answers to (one must be in ``aud``);
            ``None`` means the issuer alone.
        skew: Seconds of clock difference tolerated on ``exp`` and ``iat``.

    Returns:
        The token's claims.

    Raises:
        UnknownKeyId: ``invalid_token``; no issuer key has its ``kid``: refetch the JWKS once.
        ProtocolError: ``invalid_token`` for any other failed check.
    """
    jws = verify_issuer_jws(token, keys=keys, name=_NAME)
    accepted = frozenset((issuer,) if audiences is None else audiences)
    claims = decode_issuer_claims(jws, _Payload, issuer=issuer, now=now, skew=skew, name=_NAME,
                                  max_lifetime=MAX_ACCESS_TOKEN_LIFETIME, audiences=accepted)
    return AccessTokenClaims(
        iss=claims.iss,
        sub=claims.sub,
        aud=claims.aud,
        client_id=claims.client_id,
        scope=claims.scope,
        jti=claims.jti,
        iat=claims.iat,
        exp=claims.exp,
        sgn=claims.sgn,
        cnf=claims.cnf,
    )
