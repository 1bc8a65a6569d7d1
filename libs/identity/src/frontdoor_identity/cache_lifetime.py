"""How long a fetched metadata document or JWKS may be reused (GUIDE-fetch-04, PAP-3-04).

A document is cached as its HTTP caching headers say (RFC 9111 §4.2.1), clamped into
bounds: at least a minute (an agent answering ``no-store`` cannot make Frontdoor fetch on
every request) and at most a day (a rotated or revoked key is picked up within a day
even when the headers promise a year). Without usable headers the default applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import msgspec

__all__ = ["CacheBounds", "cache_lifetime"]


class CacheBounds(msgspec.Struct, frozen=True, kw_only=True):
    """The caching knobs of `AgentDirectory`, in seconds.

    Attributes:
        minimum: Shortest reuse of a fetched document, whatever its headers say.
        maximum: Longest reuse of a fetched document, whatever its headers say.
        default: Reuse when the headers say nothing usable.
        failure: How long a failed resolution is remembered (negative cache).
        key_refresh_interval: Least time between two JWKS refetches of one client for
            an unknown ``kid``, failed attempts included (GUIDE-keys-02).
        max_clients: Most clients held in memory (least recently used go first).
    """

    minimum: float = 60.0
    maximum: float = 24 * 3600.0
    default: float = 300.0
    failure: float = 60.0
    key_refresh_interval: float = 30.0
    max_clients: int = 10_000

    def __post_init__(self) -> None:
        """Refuse inconsistent bounds at start-up.

        Raises:
            ValueError: A duration is not positive, or minimum > default or default > maximum.
        """
        if min(self.minimum, self.failure, self.key_refresh_interval) <= 0 or self.max_clients <= 0:
            raise ValueError("cache durations and max_clients must be > 0")
        if not self.minimum <= self.default <= self.maximum:
            raise ValueError("cache bounds need minimum <= default <= maximum")


def _directives(value: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for part in value.split(","):
        name, eq, arg = part.strip().partition("=")
        if name:
            out.append((name.strip().lower(), arg.strip().strip('"') if eq else None))
    return out


def _seconds(text: str | None) -> int | None:
    if text is None or not text.isascii() or not text.isdigit():
        return None
    return int(text[:12])  # a huge delta-seconds is simply "very long" (RFC 9111 §1.2.2)


def _http_date(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo is not None else None


def _freshness(headers: Mapping[str, str], now: datetime) -> float | None:
    directives = _directives(headers.get("cache-control", ""))
    names = {name for name, _ in directives}
    if names & {"no-store", "no-cache"}:
        return 0.0
    ages = [_seconds(arg) for name, arg in directives if name == "max-age"]
    if ages:
        valid = [age for age in ages if age is not None]
        # An invalid or repeated max-age is treated as stale (RFC 9111 §4.2.1, §5.2).
        lifetime: float | None = float(min(valid)) if len(valid) == len(ages) else 0.0
    else:
        expires_text = headers.get("expires")
        if expires_text is None:
            return None
        expires = _http_date(expires_text)
        if expires is None:
            return 0.0  # an invalid Expires, such as "0", means already expired (RFC 9111 §5.3)
        date = _http_date(headers.get("date")) or now
        lifetime = (expires - date).total_seconds()
    age = _seconds(headers.get("age")) or 0
    return None if lifetime is None else lifetime - age


def cache_lifetime(headers: Mapping[str, str], *, now: datetime, bounds: CacheBounds) -> timedelta:
    """How long a response with ``headers`` may be reused, within ``bounds``.

    ``max-age`` wins over ``Expires``; ``Age`` is subtracted; ``no-store`` and
    ``no-cache`` mean the minimum. ``private`` and ``s-maxage`` are ignored: Frontdoor
    is the only user of what it caches.

    Args:
        headers: Response headers with lower-cased names (as `FetchResult` has them).
        now: The current time, for an ``Expires`` without a ``Date``.
        bounds: The clamp and the default.

    Returns:
        A duration between ``bounds.minimum`` and ``bounds.maximum``.
    """
    freshness = _freshness(headers, now)
    seconds = bounds.default if freshness is None else min(max(freshness, bounds.minimum), bounds.maximum)
    return timedelta(seconds=seconds)
