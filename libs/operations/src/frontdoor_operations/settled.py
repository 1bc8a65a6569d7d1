"""Telling a waiting confirm that its operation's outcome is known, across processes.

Whoever records an outcome (the ledger's own fast path, the worker's retry, the company's
report through the ledger API) publishes the operation ID on one Redis channel after the
commit. Each ledger process keeps one subscription and wakes the confirm requests waiting
on that ID: no polling. A lost notification only costs the wait budget: the waiter reads
the operation from PostgreSQL, the record, when it wakes or times out.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import redis.asyncio as aioredis
import structlog

__all__ = ["CHANNEL", "OutcomeWaiters", "publish_settled"]

CHANNEL: Final = "frontdoor:operations:settled"
_log = structlog.get_logger("frontdoor.operations")


async def publish_settled(redis: aioredis.Redis, operation_id: str) -> None:
    """Announce that ``operation_id`` has its outcome (best effort: waiters re-read anyway)."""
    try:
        await redis.publish(CHANNEL, operation_id)
    except Exception:
        _log.warning("operations.settled_publish_failed")


class OutcomeWaiters:
    """One process's waiters, woken by the channel or directly by this process."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Subscribe (in the background; reconnecting after a Redis outage)."""
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="operations-settled-listener")

    async def stop(self) -> None:
        """Stop listening."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        while True:
            try:
                pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                await pubsub.subscribe(CHANNEL)
                try:
                    while True:
                        message = await pubsub.get_message(timeout=5.0)
                        if message is not None and message.get("type") == "message":
                            data = message.get("data")
                            self.wake(data.decode() if isinstance(data, bytes) else str(data))
                finally:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]
            except asyncio.CancelledError:
                raise
            except Exception:
                _log.warning("operations.settled_listener_retry")
                await asyncio.sleep(1.0)

    def wake(self, operation_id: str) -> None:
        """Wake this process's waiters on ``operation_id``."""
        for event in self._waiting.get(operation_id, ()):
            event.set()

    async def wait(self, operation_id: str, timeout: float) -> bool:  # noqa: ASYNC109 - a budget, not I/O
        """Wait up to ``timeout`` seconds for ``operation_id``'s outcome; True if woken."""
        event = asyncio.Event()
        self._waiting.setdefault(operation_id, set()).add(event)
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiting.get(operation_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiting[operation_id]
