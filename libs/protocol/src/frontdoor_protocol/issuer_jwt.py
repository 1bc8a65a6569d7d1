"""The signature half shared by every JWT the tenant's issuer signs and a resource verifies.

Session Tokens (0.2) and access tokens (1.0) are both RFC 9068 ``at+jwt`` values signed
with ES256 by a key of the issuer's JWKS. Before their claims are read, each is parsed
once (strict JSON, no ``crit``), its ``typ`` and ``alg`` checked, any key carried in the
header refused (GUIDE-jwt-03), the key chosen by ``kid`` and the signature verified. Every
refusal is ``invalid_token`` with Frontdoor's own words, never a value from the token.
"""

from __future__ import annotations

from typing import Final, Protocol, TypeVar

import msgspec
from joserfc.jwk import ECKey, KeySet

from frontdoor_protocol.compact_jws import CompactJWS, MalformedJWS, parse_compact_jws
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_verification import KeyProblem, embeds_key, refusal, select_verification_keys
from frontdoor_protocol.jws_verification import signature_verifies as _signature_verifies
from frontdoor_protocol.jwt_assertion import media_type

__all__ = [
    "ISSUER_JWT_ALGORITHM",
    "ISSUER_JWT_TYPE",
    "IssuerClaims",
    "check_signing_key",
    "decode_issuer_claims",
    "verify_issuer_jws",
]

ISSUER_JWT_TYPE: Final = "at+jwt"
"""The ``typ`` of an issuer-signed access token (RFC 9068 §2.1)."""
ISSUER_JWT_ALGORITHM: Final = "ES256"
"""The only algorithm the issuer signs its tokens with."""

_INVALID = ErrorCode.INVALID_TOKEN
_ACCEPTED_TYPES: Final = frozenset({ISSUER_JWT_TYPE})


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
        jws = parse_compact_jws(token)
    except MalformedJWS:
        raise ProtocolError(_INVALID, f"{name} is not a compact JWS") from None
    header = jws.header
    if media_type(header.get("typ")) not in _ACCEPTED_TYPES:
        raise ProtocolError(_INVALID, f"{name} typ is not at+jwt")
    if jws.alg != ISSUER_JWT_ALGORITHM or embeds_key(header):
        raise ProtocolError(_INVALID, f"{name} header is not accepted")
    kid = header.get("kid")
    if not isinstance(kid, str):
        raise ProtocolError(_INVALID, f"{name} has no kid")
    selected = select_verification_keys(keys, kid=kid, alg=ISSUER_JWT_ALGORITHM)
    if isinstance(selected, KeyProblem):
        raise refusal(_INVALID, selected, name)
    if not any(_signature_verifies(jws, key) for key in selected):
        raise ProtocolError(_INVALID, f"{name} signature is invalid")
    return jws


def decode_issuer_claims(
    jws: CompactJWS, kind: type[ClaimsT], *, issuer: str, now: int, skew: int, name: str
) -> ClaimsT:
    """Decode a verified token's claims and check what every issuer token shares.

    ``iss`` is ``issuer`` exactly; ``iat < exp``; not expired and not issued in the future
    beyond ``skew``; a ``cnf`` has a non-empty ``jkt``.

    Args:
        jws: From :func:`verify_issuer_jws`.
        kind: The msgspec Struct of the token's claims (``token_use`` required).
        issuer: The tenant's issuer.
        now: The current time, in seconds since the epoch.
        skew: Seconds of clock difference tolerated.
        name: What the token is, in error descriptions.

    Returns:
        The decoded claims.

    Raises:
        ProtocolError: ``invalid_token``.
    """
    try:
        claims = msgspec.json.decode(jws.payload, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ProtocolError(_INVALID, f"{name} claims are not accepted") from None
    if claims.iss != issuer:
        raise ProtocolError(_INVALID, f"{name} iss is not this issuer")
    if claims.exp <= claims.iat or now >= claims.exp + skew:
        raise ProtocolError(_INVALID, f"{name} has expired")
    if claims.iat > now + skew:
        raise ProtocolError(_INVALID, f"{name} is issued in the future")
    if claims.jkt == "":
        raise ProtocolError(_INVALID, f"{name} cnf is malformed")
    return claims
