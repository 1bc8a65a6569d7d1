"""A clock tests can move forward while the app keeps reading it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class ShiftableClock:
    """Real time plus an offset the test controls."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **kwargs: float) -> None:
        self.offset += timedelta(**kwargs)

    def reset(self) -> None:
        self.offset = timedelta(0)
