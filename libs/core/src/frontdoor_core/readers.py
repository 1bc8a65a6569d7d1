"""A process's readers waiting for news, by key: waiters register, writers wake.

The one shape behind the ledger's conversation waiters
(`frontdoor_conversations.wakeups.ConversationWaiters`, keyed ``{tenant}:{conversation}``),
the dashboard's inbox streams (keyed by tenant, or by ``{tenant}:{conversation}``) and the
confirms waiting for an operation's outcome (`frontdoor_operations.settled.OutcomeWaiters`,
keyed by operation ID): a reader registers before it reads, is woken by key, and leaves when
its block ends, taking its key with it once no reader is left (so a process holding many
short-lived readers keeps no empty sets). Cross-process wake-ups reach it through
`.channel_listener`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ["Reader", "ReaderRegistry"]


class Reader(Protocol):
    """What a registry wakes: a reader's ``changed`` event."""

    @property
    def changed(self) -> asyncio.Event: ...


R = TypeVar("R", bound=Reader)


class ReaderRegistry(Generic[R]):
    """This process's readers by key.

    Args:
        make: Builds a new reader (a fresh ``changed`` event, and whatever else it carries).
    """

    def __init__(self, make: Callable[[], R]) -> None:
        self._make = make
        self._readers: dict[str, set[R]] = {}

    def __len__(self) -> int:
        """How many readers are registered, under every key."""
        return sum(len(s) for s in self._readers.values())

    def of(self, *keys: str) -> tuple[R, ...]:
        """The readers registered under any of ``keys`` (a copy: waking may change the registry)."""
        return tuple(reader for key in keys for reader in self._readers.get(key, ()))

    def wake(self, *keys: str) -> None:
        """Set the ``changed`` event of every reader under ``keys``."""
        for reader in self.of(*keys):
            reader.changed.set()

    def wake_all(self) -> None:
        """Set every reader's ``changed`` event (the process stops)."""
        for readers in list(self._readers.values()):
            for reader in tuple(readers):
                reader.changed.set()

    @contextlib.contextmanager
    def subscribe(self, key: str) -> Iterator[R]:
        """Register a new reader under ``key`` for as long as the block runs (register before reading)."""
        reader = self._make()
        self._readers.setdefault(key, set()).add(reader)
        try:
            yield reader
        finally:
            readers = self._readers.get(key)
            if readers is not None:
                readers.discard(reader)
                if not readers:
                    del self._readers[key]
