"""Time as an injectable dependency: the sdk never reads the wall clock directly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "epoch_seconds", "utc_now"]

Clock = Callable[[], datetime]
"""Returns the current time, timezone-aware (tests pass a clock they can move)."""


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def epoch_seconds(clock: Clock) -> float:
    """The clock's current time in seconds since the epoch."""
    return clock().timestamp()
