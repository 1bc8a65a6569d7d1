"""The JWT bearer assertion checks that client and Session assertions share (RFC 7523 §3).

An agent signs both with a key from its verified ``jwks_uri`` (PAP §4.1, §4.2); they
differ only in ``sub``, the error code and the ``typ`` values accepted. In order:

1. A strict compact JWS, an allowed public-key ``alg`` (GUIDE-jwt-02), an accepted
   ``typ`` (so a browser assertion or a DPoP proof is never taken for one, PAP-5-05) and
   no key carried in the header (GUIDE-jwt-03).
2. The key named by ``kid`` (or the only fitting key) from the caller's key set, fitting
   the ``alg``; an unknown ``kid`` raises :class:`UnknownKeyId` so the caller can refetch.
3. The signature.
4. ``iss``; ``aud`` one string equal to the issuer character for character
   (PAP-4.1-05, PAP-4.2-07); ``exp`` and ``iat`` with ``exp - iat`` at most the maximum
   lifetime (PAP-4.2-08); ``exp``, ``iat`` and ``nbf`` against ``now`` with a small skew
   (GUIDE-jwt-04); a ``jti`` (PAP-4.2-09, the caller checks replay); ``sub``.

Both are profiles of :mod:`frontdoor_protocol.jwt_profile` (which applies these checks in
this order); every refusal has the same code and the description names the failed check,
never a value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from functools import lru_cache
from typing import Final

import msgspec
from joserfc.jwk import KeySet

from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.jws_verification import KeyProblem, allowed_algorithms, refusal
from frontdoor_protocol.jwt_profile import (
    ClaimRule,
    JWTProfile,
    JWTRefusal,
    JWTRefusalKind,
    media_type,
    verify_profiled_jwt,
)

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


_DESCRIPTIONS: Final[Mapping[JWTRefusalKind, str]] = {
    JWTRefusalKind.MALFORMED: "is not a compact JWS",
    JWTRefusalKind.CRITICAL_HEADER: "is not a compact JWS",
    JWTRefusalKind.WRONG_TYPE: "typ is not accepted",
    JWTRefusalKind.ALGORITHM_NOT_ACCEPTED: "alg is not accepted",
    JWTRefusalKind.EMBEDDED_KEY: "must not carry or reference a key",
    JWTRefusalKind.MALFORMED_KID: "kid is malformed",
    JWTRefusalKind.UNKNOWN_KEY: "key is unknown",
    JWTRefusalKind.AMBIGUOUS_KEY: "must name its key with kid",
    JWTRefusalKind.KEY_DOES_NOT_FIT: "alg does not fit its key",
    JWTRefusalKind.BAD_SIGNATURE: "signature is invalid",
    JWTRefusalKind.MALFORMED_CLAIMS: "claims are not a JSON object",
    JWTRefusalKind.WRONG_ISSUER: "iss is not the client",
    JWTRefusalKind.WRONG_AUDIENCE: "aud is not this issuer",
    JWTRefusalKind.AUDIENCE_NOT_ONE_STRING: "aud must be a single string",
    JWTRefusalKind.LIFETIME_TOO_LONG: "lifetime is not accepted",
    JWTRefusalKind.EXPIRED: "has expired",
    JWTRefusalKind.ISSUED_IN_FUTURE: "is issued in the future",
    JWTRefusalKind.NOT_YET_VALID: "is not valid yet",
    JWTRefusalKind.FORBIDDEN_CLAIM: "carries a claim it must not",
}
"""What each refused check says after the assertion's name (stable descriptions)."""
_CLAIM_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "iss": "iss is not the client",
    "sub": "sub is not accepted",
    # One string, never an array, so the assertion works at one company only.
    "aud": "aud must be a single string",
    "exp": "needs numeric exp and iat",
    "iat": "needs numeric exp and iat",
    "nbf": "is not valid yet",
    "jti": "jti is missing or too short",
}
"""A missing or invalid claim, by name."""


@lru_cache(maxsize=32)
def _profile(types: frozenset[str], algorithms: frozenset[str], max_lifetime: int) -> JWTProfile:
    """The profile of a bearer assertion: ``typ`` optional, ``sub`` a string (then ``subject_ok``)."""
    return JWTProfile(
        types=types,
        typ_optional=True,
        algorithms=allowed_algorithms(algorithms),
        max_lifetime=max_lifetime,
        required=(ClaimRule("sub", lambda value: isinstance(value, str)),),
    )


def _error(refused: JWTRefusal, code: ErrorCode, name: str) -> ProtocolError:
    if refused.kind is JWTRefusalKind.UNKNOWN_KEY:
        return refusal(code, KeyProblem.UNKNOWN_KID, name)
    if refused.claim is not None:
        return ProtocolError(code, f"{name} {_CLAIM_DESCRIPTIONS.get(refused.claim, 'claims are not accepted')}")
    return ProtocolError(code, f"{name} {_DESCRIPTIONS.get(refused.kind, 'is not accepted')}")


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
    if skew < 0:
        raise ValueError("max_lifetime must be positive and skew non-negative")
    profile = _profile(frozenset(types), frozenset(algorithms), max_lifetime)
    try:
        verified = verify_profiled_jwt(
            assertion, profile, keys=keys, issuer=expected_iss, audience=audience, now=now, skew=skew
        )
    except JWTRefusal as refused:
        raise _error(refused, code, name) from None
    subject = verified.claims["sub"]
    if not subject_ok(subject):
        raise ProtocolError(code, f"{name} {_CLAIM_DESCRIPTIONS['sub']}")
    return VerifiedAssertion(
        subject=subject,
        jti=verified.jti,
        iat=verified.iat,
        exp=verified.exp,
        kid=verified.kid,
        alg=verified.alg,
    )
