"""What every JWT the tenant's issuer signs and a resource verifies shares: one JWT profile.

Session Tokens (0.2) and access tokens (1.0) are both RFC 9068 ``at+jwt`` values signed
with ES256 by a key of the issuer's JWKS (RFC 9068 §2.1, §4; RFC 8725 §3.11). They are
profiles of :mod:`frontdoor_protocol.jwt_profile`: the header (``typ`` ``at+jwt``, ES256, a
``kid``, no key carried, GUIDE-jwt-03), the signature by the key ``kid`` names, then
``iss`` exactly the issuer, ``aud`` as the type reads it, ``0 < exp - iat <=`` the type's
longest lifetime (PAP-4.2-04), not expired and not issued in the future beyond the skew
(GUIDE-jwt-04), a ``jti``; last the claims decode into the type's Struct (``token_use``
keeps the two apart) and a ``cnf`` has a non-empty ``jkt`` (RFC 9449 §6.1). Every refusal
is ``invalid_token`` with Frontdoor's own words (one table), never a value from the token.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Final, Protocol, TypeVar

import msgspec
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import CompactJWS
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_verification import KeyProblem, refusal
from frontdoor_protocol.jwt_profile import (
    AudienceRule,
    JWTProfile,
    check_profiled_claims,
    check_profiled_signature,
    non_empty_string,
    read_profiled_jws,
)
from frontdoor_protocol.jwt_refusal import JWTRefusal, JWTRefusalKind

__all__ = [
    "ISSUER_JWT_ALGORITHM",
    "ISSUER_JWT_TYPE",
    "IssuerClaims",
    "check_signing_key",
    "decode_issuer_claims",
    "issuer_profile",
    "verify_issuer_jws",
]

ISSUER_JWT_TYPE: Final = "at+jwt"
"""The ``typ`` of an issuer-signed access token (RFC 9068 §2.1)."""
ISSUER_JWT_ALGORITHM: Final = "ES256"
"""The only algorithm the issuer signs its tokens with."""

_INVALID = ErrorCode.INVALID_TOKEN
_K = JWTRefusalKind


@lru_cache(maxsize=8)
def issuer_profile(max_lifetime: int, audience: AudienceRule | None = None) -> JWTProfile:
    """The profile of an issuer token living at most ``max_lifetime`` seconds.

    Args:
        max_lifetime: The type's longest lifetime.
        audience: How the profile reads ``aud``; ``None`` when the type checks it itself.
    """
    return JWTProfile(
        types=frozenset({ISSUER_JWT_TYPE}),
        algorithms=frozenset({ISSUER_JWT_ALGORITHM}),
        kid_required=True,
        max_lifetime=max_lifetime,
        audience=audience,
        jti_valid=non_empty_string,
    )


_HEADER_PROFILE: Final = issuer_profile(1)
"""For the header and signature steps, which read no lifetime."""
_DESCRIPTIONS: Final[Mapping[JWTRefusalKind, str]] = {
    _K.MALFORMED: "is not a compact JWS",
    _K.WRONG_TYPE: "typ is not at+jwt",
    _K.ALGORITHM_NOT_ACCEPTED: "header is not accepted",
    _K.EMBEDDED_KEY: "header is not accepted",
    _K.MISSING_KID: "has no kid",
    _K.MALFORMED_KID: "has no kid",
    _K.BAD_SIGNATURE: "signature is invalid",
    _K.WRONG_ISSUER: "iss is not this issuer",
    _K.WRONG_AUDIENCE: "is for another resource",
    _K.LIFETIME_TOO_LONG: "lifetime is not accepted",
    _K.EXPIRED: "has expired",
    _K.ISSUED_IN_FUTURE: "is issued in the future",
    _K.NOT_YET_VALID: "is not valid yet",
}
"""What each refused check says after the token's name; a claim problem "claims are not accepted"."""
_KEY_PROBLEMS: Final[Mapping[JWTRefusalKind, KeyProblem]] = {
    _K.UNKNOWN_KEY: KeyProblem.UNKNOWN_KID,
    _K.AMBIGUOUS_KEY: KeyProblem.AMBIGUOUS,
    _K.KEY_DOES_NOT_FIT: KeyProblem.NO_FITTING_KEY,
}


def _error(refused: JWTRefusal, name: str) -> ProtocolError:
    problem = _KEY_PROBLEMS.get(refused.kind)
    if problem is not None:
        return refusal(_INVALID, problem, name)
    return ProtocolError(_INVALID, f"{name} {_DESCRIPTIONS.get(refused.kind, 'claims are not accepted')}")


class IssuerClaims(Protocol):
    """What every issuer-signed token's claims have."""

    @property
    def iss(self) -> str: ...
    @property
    def iat(self) -> int: ...
    @property
    def exp(self) -> int: ...
    @property
    def jkt(self) -> str | None: ...


ClaimsT = TypeVar("ClaimsT", bound=IssuerClaims)


def check_signing_key(key: object, kid: str) -> None:
    """Refuse to mint with anything but a private P-256 key and a ``kid``.

    Raises:
        ValueError: When ``key`` is not a private P-256 :class:`ECKey` or ``kid`` is empty.
    """
    if not isinstance(key, ECKey) or key.curve_name != "P-256" or not key.is_private:
        raise ValueError("issuer tokens are signed with a private P-256 key")
    if not kid:
        raise ValueError("kid is required")


def verify_issuer_jws(token: object, *, keys: KeySet, name: str) -> CompactJWS:
    """Parse an issuer-signed JWT and verify its signature; the claims are not read yet.

    Args:
        token: The token exactly as sent.
        keys: The issuer's signing keys (its JWKS).
        name: What the token is, in error descriptions (``"session token"``).

    Returns:
        The parsed JWS, signature verified.

    Raises:
        UnknownKeyId: ``invalid_token``, no key has the ``kid``: refetch the JWKS once.
        ProtocolError: ``invalid_token`` for any other failure.
    """
    try:
        jws = read_profiled_jws(token, _HEADER_PROFILE)
        check_profiled_signature(jws, _HEADER_PROFILE, keys)
    except JWTRefusal as refused:
        raise _error(refused, name) from None
    return jws


def decode_issuer_claims(
    jws: CompactJWS,
    kind: type[ClaimsT],
    *,
    issuer: str,
    now: int,
    skew: int,
    name: str,
    max_lifetime: int,
    audiences: Collection[str] | None = None,
) -> ClaimsT:
    """Check a verified token's claims against its profile, then decode them into ``kind``.

    Args:
        jws: From :func:`verify_issuer_jws`.
        kind: The msgspec Struct of the token's claims (``token_use`` required).
        issuer: The tenant's issuer.
        now: The current time, in seconds since the epoch.
        skew: Seconds of clock difference tolerated.
        name: What the token is, in error descriptions.
        max_lifetime: The type's longest lifetime.
        audiences: When given, ``aud`` (a string or an array) must hold one of them
            (RFC 9068 §4); ``None`` leaves ``aud`` to the caller.

    Returns:
        The decoded claims.

    Raises:
        ProtocolError: ``invalid_token``.
    """
    rule = None if audiences is None else AudienceRule.ANY_OF
    try:
        check_profiled_claims(
            jws, issuer_profile(max_lifetime, rule), issuer=issuer, audience=audiences, now=now, skew=skew
        )
    except JWTRefusal as refused:
        raise _error(refused, name) from None
    try:
        claims = msgspec.json.decode(jws.payload, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ProtocolError(_INVALID, f"{name} claims are not accepted") from None
    if claims.jkt == "":
        raise ProtocolError(_INVALID, f"{name} cnf is malformed")
    return claims
