"""The JWT bearer assertion checks that client and Session assertions share (RFC 7523 §3).

An agent signs both with a key from its verified ``jwks_uri`` (PAP §4.1, §4.2); they
differ only in ``sub``, the error code and the ``typ`` values accepted. In order:

1. A strict compact JWS, an allowed public-key ``alg`` (GUIDE-jwt-02), an accepted
   ``typ`` (so a browser assertion or a DPoP proof is never taken for one, PAP-5-05) and
   no key carried in the header (GUIDE-jwt-03).
2. The key named by ``kid`` (or the only fitting key) from the caller's key set, fitting
   the ``alg``; an unknown ``kid`` raises :class:`UnknownKeyId` so the caller can refetch.
3. The signature.
4. ``iss``; ``sub``; ``aud`` one string equal to the issuer character for character
   (PAP-4.1-05, PAP-4.2-07); ``exp`` and ``iat`` with ``exp - iat`` at most the maximum
   lifetime (PAP-4.2-08); ``exp``, ``iat`` and ``nbf`` against ``now`` with a small skew
   (GUIDE-jwt-04); a ``jti`` (PAP-4.2-09, the caller checks replay).

Every refusal has the same code; the description names the failed check, never a value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Final

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.compact_jws import CompactJWS, MalformedJWS, parse_compact_jws
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_verification import (
    KeyProblem,
    allowed_algorithms,
    embeds_key,
    refusal,
    select_verification_keys,
    signature_verifies,
)
from frontdoor_protocol.jwt_claims import is_jwt_id, numeric_date

__all__ = [
    "DEFAULT_ASSERTION_ALGORITHMS",
    "DEFAULT_CLOCK_SKEW",
    "MAX_ASSERTION_LIFETIME",
    "VerifiedAssertion",
    "media_type",
    "verify_jwt_assertion",
]

MAX_ASSERTION_LIFETIME: Final = 300
"""Most seconds from ``iat`` to ``exp`` (PAP-4.2-08; the same bound for client assertions)."""
DEFAULT_CLOCK_SKEW: Final = 60
"""Seconds of clock difference tolerated on ``exp``, ``iat`` and ``nbf`` (GUIDE-jwt-04)."""
DEFAULT_ASSERTION_ALGORITHMS: Final = ("ES256", "RS256")
"""What the issuer metadata lists by default (GUIDE-jwt-01)."""


class VerifiedAssertion(msgspec.Struct, frozen=True, kw_only=True):
    """What a verified assertion tells its caller.

    Attributes:
        subject: ``sub``.
        jti: ``jti``, for the caller's replay check.
        iat: ``iat`` in whole seconds.
        exp: ``exp`` in whole seconds, rounded up.
        kid: The ``kid`` of the key that verified the signature.
        alg: The signature algorithm.
    """

    subject: str
    jti: str
    iat: int
    exp: int
    kid: str | None
    alg: str


def media_type(value: object) -> str | None:
    """A ``typ``/``cty`` value compared as RFC 7515 §4.1.9 says: case-insensitively,
    with an omitted ``application/`` prefix.

    Args:
        value: The header member.

    Returns:
        The lower-case media type without ``application/``, or ``None`` for a non-string.
    """
    if not isinstance(value, str):
        return None
    lowered = value.lower()
    return lowered.removeprefix("application/")


def _checked_parameters(max_lifetime: int, skew: int) -> None:
    if max_lifetime <= 0 or skew < 0:
        raise ValueError("max_lifetime must be positive and skew non-negative")


def verify_jwt_assertion(
    assertion: str,
    *,
    code: ErrorCode,
    name: str,
    expected_iss: str,
    audience: str,
    subject_ok: Callable[[str], bool],
    keys: KeySet,
    now: int,
    algorithms: Collection[str] = DEFAULT_ASSERTION_ALGORITHMS,
    types: Collection[str] = ("jwt",),
    max_lifetime: int = MAX_ASSERTION_LIFETIME,
    skew: int = DEFAULT_CLOCK_SKEW,
) -> VerifiedAssertion:
    """Verify a JWT bearer assertion; see the module docstring for the checks.

    Args:
        assertion: The compact JWT as received.
        code: The error code of every refusal.
        name: What the assertion is, for descriptions (``"client assertion"``).
        expected_iss: The value ``iss`` must equal exactly (the ``client_id``).
        audience: The value ``aud`` must equal exactly (the issuer identifier).
        subject_ok: Whether a string ``sub`` is acceptable.
        keys: Keys from the agent's verified ``jwks_uri``.
        now: The current time, in seconds since the epoch.
        algorithms: Allowed ``alg`` values; public-key algorithms only.
        types: Accepted ``typ`` values as :func:`media_type` returns them; an absent
            ``typ`` is always accepted.
        max_lifetime: Most seconds from ``iat`` to ``exp``.
        skew: Seconds of clock difference tolerated.

    Returns:
        The verified subject, ``jti``, times and key.

    Raises:
        UnknownKeyId: No key has the ``kid`` (or none fits and there is no ``kid``);
            refetch the JWKS at most once and retry.
        ProtocolError: ``code`` for any other failed check.
        ValueError: For a bad argument (an algorithm that is not public-key, a
            non-positive lifetime, a negative skew).
    """
    allowed = allowed_algorithms(algorithms)
    _checked_parameters(max_lifetime, skew)
    try:
        jws = parse_compact_jws(assertion)
    except MalformedJWS:
        raise ProtocolError(code, f"{name} is not a compact JWS") from None
    header = jws.header
    if "typ" in header and media_type(header["typ"]) not in types:
        raise ProtocolError(code, f"{name} typ is not accepted")
    if jws.alg not in allowed:
        raise ProtocolError(code, f"{name} alg is not accepted")
    if embeds_key(header):
        raise ProtocolError(code, f"{name} must not carry or reference a key")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise ProtocolError(code, f"{name} kid is malformed")
    used_kid = _verify_signature(jws, keys, kid=kid, code=code, name=name)
    try:
        claims = jws.claims()
    except MalformedJWS:
        raise ProtocolError(code, f"{name} claims are not a JSON object") from None
    return _verified_claims(
        claims,
        code=code,
        name=name,
        expected_iss=expected_iss,
        audience=audience,
        subject_ok=subject_ok,
        now=now,
        max_lifetime=max_lifetime,
        skew=skew,
        kid=used_kid,
        alg=jws.alg,
    )


def _verify_signature(jws: CompactJWS, keys: KeySet, *, kid: str | None, code: ErrorCode, name: str) -> str | None:
    selected = select_verification_keys(keys, kid=kid, alg=jws.alg)
    if isinstance(selected, KeyProblem):
        raise refusal(code, selected, name)
    for key in selected:
        if signature_verifies(jws, key):
            return key.kid
    raise ProtocolError(code, f"{name} signature is invalid")


def _verified_claims(
    claims: dict[str, Any],
    *,
    code: ErrorCode,
    name: str,
    expected_iss: str,
    audience: str,
    subject_ok: Callable[[str], bool],
    now: int,
    max_lifetime: int,
    skew: int,
    kid: str | None,
    alg: str,
) -> VerifiedAssertion:
    if claims.get("iss") != expected_iss:
        raise ProtocolError(code, f"{name} iss is not the client")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject_ok(subject):
        raise ProtocolError(code, f"{name} sub is not accepted")
    aud = claims.get("aud")
    if not isinstance(aud, str):
        # One string, never an array, so the assertion works at one company only.
        raise ProtocolError(code, f"{name} aud must be a single string")
    if aud != audience:
        raise ProtocolError(code, f"{name} aud is not this issuer")
    exp = numeric_date(claims.get("exp"), round_up=True)
    iat = numeric_date(claims.get("iat"))
    if exp is None or iat is None:
        raise ProtocolError(code, f"{name} needs numeric exp and iat")
    if exp <= iat or exp - iat > max_lifetime:
        raise ProtocolError(code, f"{name} lifetime is not accepted")
    if now >= exp + skew:
        raise ProtocolError(code, f"{name} has expired")
    if iat > now + skew:
        raise ProtocolError(code, f"{name} is issued in the future")
    if "nbf" in claims:
        nbf = numeric_date(claims["nbf"])
        if nbf is None or nbf > now + skew:
            raise ProtocolError(code, f"{name} is not valid yet")
    jti = claims.get("jti")
    if not is_jwt_id(jti):
        raise ProtocolError(code, f"{name} jti is missing or too short")
    return VerifiedAssertion(subject=subject, jti=jti, iat=iat, exp=exp, kid=kid, alg=alg)
