"""Waking readers of a conversation across processes: long polls, streams, text deltas.

Whoever appends events publishes ``{tenant}:{conversation}`` on one Redis channel after
the commit (and wakes this process's readers directly). A company's streamed pieces of a
message (`text-delta`, display only, §7.6) go on the same channel with their text, and the
last pieces of each message are kept in Redis for a few minutes so that a stream opened
while (or just after) the company writes still shows them before the complete message.
Each process keeps one subscription. A lost notification costs only the wait: readers
re-read PostgreSQL, the record, when woken or at their deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterator
from typing import Any, Final

import msgspec
import redis.asyncio as aioredis
import structlog
from frontdoor_core.channel_listener import ChannelListener
from frontdoor_core.readers import ReaderRegistry
from frontdoor_core.redis_keys import shard

__all__ = ["CHANNEL", "DELTA_TTL_SECONDS", "ConversationWaiters", "Subscription", "publish_changed",
           "publish_delta", "recent_deltas"]

CHANNEL: Final = "frontdoor:conversations:changed"
DELTA_TTL_SECONDS: Final = 600
_MAX_PIECES = 200
_log = structlog.get_logger("frontdoor.conversations")


def _key(tenant_id: str, conversation_id: str) -> str:
    return f"{tenant_id}:{conversation_id}"


def _delta_key(tenant_id: str, message_id: str) -> str:
    return f"frontdoor:conversations:deltas:{shard(tenant_id)}:{message_id}"


async def publish_changed(redis: aioredis.Redis, tenant_id: str, conversation_id: str) -> None:
    """Announce new events (best effort: readers re-read anyway)."""
    try:
        await redis.publish(CHANNEL, msgspec.json.encode({"k": _key(tenant_id, conversation_id)}))
    except Exception:
        _log.warning("conversations.publish_failed")


async def publish_delta(redis: aioredis.Redis, tenant_id: str, conversation_id: str, message_id: str,
                        text: str) -> None:
    """A piece of a message the company is writing: kept briefly, and sent to open streams."""
    delta = {"message_id": message_id, "text": text}
    key = _delta_key(tenant_id, message_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key, msgspec.json.encode(delta))
        pipe.ltrim(key, -_MAX_PIECES, -1)
        pipe.expire(key, DELTA_TTL_SECONDS)
        await pipe.execute()
    # After the MULTI, not in it: a Redis Cluster refuses PUBLISH (no key, no slot) in a
    # pipeline. A stream that reconnects between the two reads the piece from the list.
    await redis.publish(CHANNEL, msgspec.json.encode({"k": _key(tenant_id, conversation_id), "d": delta}))


async def recent_deltas(redis: aioredis.Redis, tenant_id: str, message_id: str) -> list[dict[str, Any]]:
    """The pieces the company streamed for ``message_id`` in the last minutes (none when lost)."""
    try:
        raw = await redis.lrange(_delta_key(tenant_id, message_id), 0, -1)
    except Exception:
        return []
    return [msgspec.json.decode(item) for item in raw]


class Subscription:
    """One reader's view of a conversation's changes: a flag for new events, a queue of deltas."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()
        self.deltas: deque[dict[str, Any]] = deque(maxlen=1000)

    def take_deltas(self) -> Iterator[dict[str, Any]]:
        while self.deltas:
            yield self.deltas.popleft()


class ConversationWaiters:
    """This process's readers, woken by the channel or directly."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._readers: ReaderRegistry[Subscription] = ReaderRegistry(Subscription)
        self._listener = ChannelListener(redis, CHANNEL, self._dispatch, name="conversations-listener",
                                         log=_log, retry_event="conversations.listener_retry")

    async def start(self) -> None:
        """Subscribe in the background (reconnecting after a Redis outage)."""
        await self._listener.start()

    async def stop(self) -> None:
        """Stop listening."""
        await self._listener.stop()

    @property
    def readers(self) -> int:
        return len(self._readers)

    def _dispatch(self, data: Any) -> None:
        try:
            note = msgspec.json.decode(data if isinstance(data, bytes) else str(data).encode())
            key = note["k"]
        except (msgspec.DecodeError, KeyError, TypeError):
            return
        for reader in self._readers.of(str(key)):
            delta = note.get("d")
            if isinstance(delta, dict):
                reader.deltas.append(delta)
            reader.changed.set()

    def wake(self, tenant_id: str, conversation_id: str) -> None:
        """Wake this process's readers of a conversation."""
        self._readers.wake(_key(tenant_id, conversation_id))

    @contextlib.contextmanager
    def subscribe(self, tenant_id: str, conversation_id: str) -> Iterator[Subscription]:
        """Register a reader for as long as the block runs (register before reading)."""
        with self._readers.subscribe(_key(tenant_id, conversation_id)) as reader:
            yield reader
