"""Per-process "at most once per interval per key", for writes that may lag a little."""

from __future__ import annotations

import time
from collections.abc import Hashable

__all__ = ["Throttle"]


class Throttle:
    """Answers True the first time a key is seen in each ``interval`` (bounded memory)."""

    def __init__(self, interval: float, *, max_keys: int = 50_000) -> None:
        self._interval = interval
        self._max = max_keys
        self._last: dict[Hashable, float] = {}

    def due(self, key: Hashable) -> bool:
        """Whether the write keyed by ``key`` should happen now."""
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            return False
        if len(self._last) >= self._max:
            self._last.clear()
        self._last[key] = now
        return True
