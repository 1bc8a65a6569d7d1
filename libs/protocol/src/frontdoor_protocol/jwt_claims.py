"""Value rules for registered JWT claims (RFC 7519 §4.1) shared by every verifier.

``exp``, ``iat`` and ``nbf`` are NumericDates: JSON numbers, never strings or booleans,
that fit a real clock. A ``jti`` is a replay key stored by the caller, so it must be long
enough not to collide by chance (GUIDE-jwt-05: 128 random bits, 22 base64url characters)
and short and plain enough to store and log safely.
"""

from __future__ import annotations

import math
import re
from typing import Final, TypeGuard

__all__ = ["MAX_JTI_LENGTH", "MAX_NUMERIC_DATE", "MIN_JTI_LENGTH", "is_jwt_id", "numeric_date"]

MIN_JTI_LENGTH: Final = 16
"""Shortest ``jti`` accepted: 96 bits even as base64url; shorter ones collide by guessing."""
MAX_JTI_LENGTH: Final = 256
MAX_NUMERIC_DATE: Final = 253402300799
"""9999-12-31T23:59:59Z: later times are refused rather than overflowing date arithmetic."""

_VISIBLE_ASCII: Final = re.compile(r"[\x21-\x7e]+")


def numeric_date(value: object, *, round_up: bool = False) -> int | None:
    """Read a NumericDate claim (RFC 7519 §2) as whole seconds.

    Args:
        value: The decoded claim.
        round_up: Round a fractional time up (for ``exp``, so a replay entry never
            expires before the JWT does) instead of down.

    Returns:
        Seconds since the epoch, or ``None`` when ``value`` is not a finite, non-negative
        number no later than :data:`MAX_NUMERIC_DATE` (booleans are not numbers here).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = math.ceil(value) if round_up else math.floor(value)
    if not 0 <= value <= MAX_NUMERIC_DATE:
        return None
    return value


def is_jwt_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an acceptable ``jti`` (RFC 7519 §4.1.7, GUIDE-jwt-05).

    Args:
        value: The decoded claim.

    Returns:
        ``True`` for a string of :data:`MIN_JTI_LENGTH` to :data:`MAX_JTI_LENGTH` visible
        ASCII characters.
    """
    return (
        isinstance(value, str)
        and MIN_JTI_LENGTH <= len(value) <= MAX_JTI_LENGTH
        and _VISIBLE_ASCII.fullmatch(value) is not None
    )
