"""The one refusal of :func:`~frontdoor_protocol.jwt_profile.verify_profiled_jwt` and its kinds.

Each message type keeps its own public reasons or descriptions; :func:`reason_table` maps
the kinds onto a type's reason enum of the same values, folding the kinds a type does not
name into coarser ones, so existing reason enums stay stable public API.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final, TypeVar

__all__ = ["JWTRefusal", "JWTRefusalKind", "reason_table"]


class JWTRefusalKind(StrEnum):
    """Which check of :func:`~frontdoor_protocol.jwt_profile.verify_profiled_jwt` failed (stable, safe to log)."""

    MALFORMED = "malformed"
    """Not a compact JWS this library accepts."""
    CRITICAL_HEADER = "critical_header"
    """The header has ``crit``: no extension is understood (RFC 7515 §4.1.11)."""
    WRONG_TYPE = "wrong_type"
    ALGORITHM_NOT_ACCEPTED = "algorithm_not_accepted"
    EMBEDDED_KEY = "embedded_key"
    """The header carries or references a key the profile does not take from it (GUIDE-jwt-03)."""
    MALFORMED_KID = "malformed_kid"
    MISSING_KID = "missing_kid"
    """The profile needs a ``kid`` and the header has none."""
    HEADER_KEY_MISSING = "header_key_missing"
    """The profile takes its key from the ``jwk`` header and it is not a JSON object."""
    HEADER_KEY_PRIVATE = "header_key_private"
    """The ``jwk`` header has a private or symmetric member (PAP-4.3-20)."""
    HEADER_KEY_INVALID = "header_key_invalid"
    """The ``jwk`` header does not import as a key."""
    UNKNOWN_KEY = "unknown_key"
    """No key has the ``kid`` (or none fits and there is no ``kid``): refetch once."""
    AMBIGUOUS_KEY = "ambiguous_key"
    """No ``kid`` and several keys fit."""
    KEY_DOES_NOT_FIT = "key_does_not_fit"
    """Keys with the ``kid`` exist but none fits the ``alg`` (or the ``jwk`` header does not)."""
    BAD_SIGNATURE = "bad_signature"
    MALFORMED_CLAIMS = "malformed_claims"
    """The payload is not a strict JSON object."""
    WRONG_ISSUER = "wrong_issuer"
    WRONG_AUDIENCE = "wrong_audience"
    AUDIENCE_NOT_ONE_STRING = "audience_not_one_string"
    MISSING_CLAIM = "missing_claim"
    INVALID_CLAIM = "invalid_claim"
    FORBIDDEN_CLAIM = "forbidden_claim"
    LIFETIME_TOO_LONG = "lifetime_too_long"
    """``exp - iat`` is above the maximum, or not positive."""
    EXPIRED = "expired"
    ISSUED_IN_FUTURE = "issued_in_future"
    """``iat`` is later than now plus the skew (or the window's future bound)."""
    ISSUED_TOO_LONG_AGO = "issued_too_long_ago"
    """``iat`` is before the profile's acceptance window (RFC 9449 §11.1)."""
    NOT_YET_VALID = "not_yet_valid"
    """``nbf`` is later than now plus the skew."""
    CLAIM_MISMATCH = "claim_mismatch"
    """A binding claim (``htm``, ``htu``, ``ath``) does not match the request or token."""
    KEY_NOT_BOUND = "key_not_bound"
    """The signing key is not the one the token is bound to (``cnf.jkt``, PAP-4.3-03)."""


class JWTRefusal(ValueError):
    """A profiled JWT is refused.

    Attributes:
        kind: The failed check.
        claim: The claim's name for a claim problem (Frontdoor's words, never a value).
    """

    def __init__(self, kind: JWTRefusalKind, claim: str | None = None) -> None:
        super().__init__(kind.value if claim is None else f"{kind.value}: {claim}")
        self.kind = kind
        self.claim = claim


_R = TypeVar("_R", bound=StrEnum)

_FOLDED: Final[Mapping[JWTRefusalKind, JWTRefusalKind]] = {
    JWTRefusalKind.CRITICAL_HEADER: JWTRefusalKind.MALFORMED,
    JWTRefusalKind.MALFORMED_KID: JWTRefusalKind.MALFORMED,
    JWTRefusalKind.MISSING_KID: JWTRefusalKind.MALFORMED,
    JWTRefusalKind.MALFORMED_CLAIMS: JWTRefusalKind.MALFORMED,
    JWTRefusalKind.HEADER_KEY_MISSING: JWTRefusalKind.EMBEDDED_KEY,
    JWTRefusalKind.HEADER_KEY_PRIVATE: JWTRefusalKind.EMBEDDED_KEY,
    JWTRefusalKind.HEADER_KEY_INVALID: JWTRefusalKind.EMBEDDED_KEY,
    JWTRefusalKind.AMBIGUOUS_KEY: JWTRefusalKind.BAD_SIGNATURE,
    JWTRefusalKind.KEY_DOES_NOT_FIT: JWTRefusalKind.BAD_SIGNATURE,
    JWTRefusalKind.KEY_NOT_BOUND: JWTRefusalKind.BAD_SIGNATURE,
    JWTRefusalKind.AUDIENCE_NOT_ONE_STRING: JWTRefusalKind.WRONG_AUDIENCE,
    JWTRefusalKind.ISSUED_IN_FUTURE: JWTRefusalKind.NOT_YET_VALID,
    JWTRefusalKind.ISSUED_TOO_LONG_AGO: JWTRefusalKind.EXPIRED,
    JWTRefusalKind.FORBIDDEN_CLAIM: JWTRefusalKind.INVALID_CLAIM,
    JWTRefusalKind.CLAIM_MISMATCH: JWTRefusalKind.INVALID_CLAIM,
}
"""How a type whose reasons are coarser than the kinds folds the finer ones."""


def reason_table(reasons: type[_R]) -> Mapping[JWTRefusalKind, _R]:
    """Each refusal kind as a message type's public reason of the same value.

    A kind the type has no reason for is folded into a coarser one (a ``crit`` header,
    a malformed or missing ``kid`` is ``malformed``, a refused ``jwk`` header ``embedded_key``, an
    ambiguous or unbound key ``bad_signature``, an ``aud`` array ``wrong_audience``, a
    future ``iat`` ``not_yet_valid``, a stale one ``expired``, a forbidden or mismatched
    claim ``invalid_claim``), so existing reason enums stay as they are.

    Args:
        reasons: The type's reason enum; it must have every unfolded kind's value.

    Returns:
        A complete table from kind to reason.

    Raises:
        ValueError: When ``reasons`` lacks a value a kind needs (at import time).
    """
    table: dict[JWTRefusalKind, _R] = {}
    for kind in JWTRefusalKind:
        try:
            table[kind] = reasons(kind.value)
        except ValueError:
            folded = _FOLDED.get(kind)
            if folded is None:
                raise ValueError(f"{reasons.__name__} has no reason for {kind.value}") from None
            table[kind] = reasons(folded.value)
    return table
