"""An opt-in, short-lived cache of Session state: fewer round trips, later sign-outs.

Off by default (``ttl=0``): Frontdoor is asked on every request, so a sign-out or a
revocation takes effect on the agent's very next request (PAP-4.9-01). With ``ttl=N`` a
Session keeps the state it had for up to ``N`` seconds after it changed, signed in after
a sign-out included. Keep ``N`` to a few seconds, and only where that delay is acceptable.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from frontdoor_sdk.clock import Clock, epoch_seconds
from frontdoor_sdk.introspection import SessionState

__all__ = ["StateCache"]

_DEFAULT_MAX_ENTRIES: Final = 10_000


class StateCache:
    """Session states by token ``jti``, each kept ``ttl`` seconds, least recent evicted first.

    Args:
        ttl: Seconds an answer is reused; ``0`` disables the cache.
        clock: The time source.
        max_entries: The most answers held.
    """

    def __init__(self, ttl: float, clock: Clock, *, max_entries: int = _DEFAULT_MAX_ENTRIES) -> None:
        if ttl < 0 or max_entries < 1:
            raise ValueError("ttl must be >= 0 and max_entries >= 1")
        self._ttl = ttl
        self._clock = clock
        self._max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, SessionState]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """Whether answers are reused at all."""
        return self._ttl > 0

    def get(self, key: str) -> SessionState | None:
        """The answer stored under ``key`` if still fresh."""
        if not self.enabled:
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        until, state = entry
        if epoch_seconds(self._clock) >= until:
            del self._entries[key]
            return None
        return state

    def put(self, key: str, state: SessionState) -> None:
        """Store an answer for ``ttl`` seconds."""
        if not self.enabled:
            return
        self._entries[key] = (epoch_seconds(self._clock) + self._ttl, state)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
