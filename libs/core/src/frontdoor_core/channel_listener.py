"""One process's subscription to one Redis pub/sub channel, kept in the background.

The wake-up hubs (a waiting confirm's outcome, a conversation's readers) each publish on
one channel after a commit and keep one subscription per process: `ChannelListener`
subscribes, hands every message's payload to a callback, and resubscribes a second after
a Redis outage. Notifications are best effort: whoever waits re-reads PostgreSQL, the
record, when woken or at its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
import structlog

__all__ = ["STOP_TIMEOUT_S", "ChannelListener"]

STOP_TIMEOUT_S = 5.0
"""Longest `ChannelListener.stop` waits for the subscription's task to end."""


class ChannelListener:
    """Calls ``on_message`` with each payload published on ``channel`` while started.

    Args:
        redis: The client to subscribe with.
        channel: The channel.
        on_message: Called with a message's ``data`` (bytes or str), in the listener's task.
        name: The background task's name.
        log: Where a lost subscription is logged (as ``retry_event``) before resubscribing.
        retry_event: The log event of a lost subscription.
    """

    def __init__(self, redis: aioredis.Redis, channel: str, on_message: Callable[[Any], None], *, name: str,
                 log: structlog.typing.FilteringBoundLogger, retry_event: str) -> None:
        self._redis = redis
        self._channel = channel
        self._on_message = on_message
        self._name = name
        self._log = log
        self._retry_event = retry_event
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Subscribe in the background (reconnecting after a Redis outage)."""
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name=self._name)

    async def stop(self) -> None:
        """Stop listening; a subscription that does not end within `STOP_TIMEOUT_S` is left to die."""
        if self._task is not None:
            self._task.cancel()
            done, _ = await asyncio.wait({self._task}, timeout=STOP_TIMEOUT_S)
            if done:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    self._task.result()
            else:  # a Redis read that ignores its cancellation must not hang a shutdown
                self._log.warning("channel_listener_stop_timeout", listener=self._name)
            self._task = None

    async def _listen(self) -> None:
        while True:
            try:
                pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                await pubsub.subscribe(self._channel)
                try:
                    while True:
                        message = await pubsub.get_message(timeout=5.0)
                        if message is not None and message.get("type") == "message":
                            self._on_message(message.get("data"))
                finally:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log.warning(self._retry_event)
                await asyncio.sleep(1.0)
