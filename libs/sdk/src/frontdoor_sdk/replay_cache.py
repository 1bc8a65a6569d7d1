"""DPoP proof replay at a resource: each proof is accepted once (RFC 9449 §11.1).

The protocol requires a replay cache at the token endpoint (PAP-4.3-06); at an API it is
RFC 9449's advice, and Frontdoor's sdk follows it. :class:`InMemoryReplayCache` serves
one process. A company running several replicas behind a load balancer should plug in
a shared store through :class:`ReplayCache`, such as Redis's ``SET key 1 NX EXAT until``,
or a proof replayed to another replica within its minute would be accepted there.
"""

from __future__ import annotations

from itertools import islice
from typing import Final, Protocol

from frontdoor_sdk.clock import Clock, epoch_seconds, utc_now

__all__ = ["InMemoryReplayCache", "ReplayCache"]

_DEFAULT_MAX_ENTRIES: Final = 100_000


class ReplayCache(Protocol):
    """Remembers keys until a time; shared by every replica that verifies the same proofs."""

    async def first_use(self, key: str, *, until: int) -> bool:
        """Record ``key`` until ``until`` (epoch seconds); ``False`` if it is already recorded.

        Must be atomic: of two concurrent calls with one key, exactly one gets ``True``.
        """
        ...


class InMemoryReplayCache:
    """A bounded, per-process :class:`ReplayCache`.

    Past ``max_entries`` the oldest entries are dropped first: under a flood, a proof could
    then be replayed once its entry is gone. Size it above your peak proofs per minute
    (the default holds 100,000, about 1,600 requests a second).

    Args:
        max_entries: The most keys held.
        clock: The time source.
    """

    def __init__(self, *, max_entries: int = _DEFAULT_MAX_ENTRIES, clock: Clock | None = None) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._clock = clock or utc_now
        # Insertion order is close to expiry order: proofs are accepted for a minute or two.
        self._entries: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    async def first_use(self, key: str, *, until: int) -> bool:
        """See :meth:`ReplayCache.first_use`; atomic within one event loop (no ``await``)."""
        now = epoch_seconds(self._clock)
        self._purge(now)
        seen = self._entries.get(key)
        if seen is not None and now <= seen:
            return False
        self._entries.pop(key, None)
        self._entries[key] = until
        while len(self._entries) > self._max_entries:
            del self._entries[next(iter(self._entries))]
        return True

    def _purge(self, now: float) -> None:
        # At most 64 of the oldest entries per call: islice, never a copy of the whole dict
        # (list(items()) made every request O(entries), ~0.3 ms at a few thousand).
        for key, until in list(islice(self._entries.items(), 64)):
            if until >= now:
                break
            del self._entries[key]
