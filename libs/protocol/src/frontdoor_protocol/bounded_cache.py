"""A bounded least-recently-used map: the one cache the pure library's verifiers share.

Verifying a JWS costs parsing, importing a key and checking a signature. Where the same
immutable input arrives on every request (a DPoP proof's ``jwk``, an agent's delegation),
that work is remembered here, keyed by the exact input, so a different byte is a miss.
Only what cannot change is cached: every check that depends on the time or on the
request still runs on each call.

The map holds at most ``maxsize`` entries; adding one past that drops the least recently
used, so a flood of new keys evicts old ones gradually instead of emptying the cache. Each
step is one C-level ``OrderedDict`` call, so sharing it between threads under the GIL
loses at most an update (a recomputation), never corrupts it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["BoundedLRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedLRU(Generic[K, V]):
    """At most ``maxsize`` entries; the least recently used is dropped first.

    Args:
        maxsize: The most entries held (at least 1).

    Raises:
        ValueError: For ``maxsize < 1``.
    """

    __slots__ = ("_entries", "_maxsize")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self._maxsize = maxsize
        self._entries: OrderedDict[K, V] = OrderedDict()

    @property
    def maxsize(self) -> int:
        """The most entries held."""
        return self._maxsize

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        """The value for ``key`` (now the most recently used), or ``None``."""
        entries = self._entries
        value = entries.pop(key, None)
        if value is not None:
            entries[key] = value  # re-inserted last: the most recently used
        return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` as the most recently used, dropping the least recently used past the bound."""
        entries = self._entries
        entries.pop(key, None)
        entries[key] = value
        while len(entries) > self._maxsize:
            try:
                entries.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def pop(self, key: K) -> None:
        """Forget ``key``, if held."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()
