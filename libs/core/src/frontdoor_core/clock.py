"""Time as an injectable dependency: protocol and lifecycle rules never read the wall clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "FrozenClock", "utc_now"]

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


class FrozenClock:
    """A clock for tests: returns ``now`` until moved with `advance` or `set`."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        """Move forward by a ``timedelta(**kwargs)``."""
        from datetime import timedelta

        self.now = self.now + timedelta(**kwargs)

    def set(self, now: datetime) -> None:
        """Jump to ``now``."""
        self.now = now
