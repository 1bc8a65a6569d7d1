"""Telling a waiting confirm that its operation's outcome is known, across processes.

Whoever records an outcome (the ledger's own fast path, the worker's retry, the company's
report through the ledger API) publishes the operation ID on one Redis channel after the
commit. Each ledger process keeps one subscription and wakes the confirm requests waiting
on that ID: no polling. A lost notification only costs the wait budget: the waiter reads
the operation from PostgreSQL, the record, when it wakes or times out.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import redis.asyncio as aioredis
import structlog
from frontdoor_core.channel_listener import ChannelListener
from frontdoor_core.readers import ReaderRegistry

__all__ = ["CHANNEL", "OutcomeWaiters", "publish_settled"]

CHANNEL: Final = "frontdoor:operations:settled"
_log = structlog.get_logger("frontdoor.operations")


async def publish_settled(redis: aioredis.Redis, operation_id: str) -> None:
    """Announce that ``operation_id`` has its outcome (best effort: waiters re-read anyway)."""
    try:
        await redis.publish(CHANNEL, operation_id)
    except Exception:
        _log.warning("operations.settled_publish_failed")


class _Waiter:
    """One confirm waiting for its operation's outcome."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()


class OutcomeWaiters:
    """One process's waiters, woken by the channel or directly by this process."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._waiting: ReaderRegistry[_Waiter] = ReaderRegistry(_Waiter)
        self._listener = ChannelListener(redis, CHANNEL, self._on_message, name="operations-settled-listener",
                                         log=_log, retry_event="operations.settled_listener_retry")

    async def start(self) -> None:
        """Subscribe (in the background; reconnecting after a Redis outage)."""
        await self._listener.start()

    async def stop(self) -> None:
        """Stop listening."""
        await self._listener.stop()

    def _on_message(self, data: Any) -> None:
        self.wake(data.decode() if isinstance(data, bytes) else str(data))

    def wake(self, operation_id: str) -> None:
        """Wake this process's waiters on ``operation_id``."""
        self._waiting.wake(operation_id)

    async def wait(self, operation_id: str, timeout: float) -> bool:  # noqa: ASYNC109 - a budget, not I/O
        """Wait up to ``timeout`` seconds for ``operation_id``'s outcome; True if woken."""
        with self._waiting.subscribe(operation_id) as waiter:
            try:
                async with asyncio.timeout(timeout):
                    await waiter.changed.wait()
                return True
            except TimeoutError:
                return False
