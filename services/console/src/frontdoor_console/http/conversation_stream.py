"""The handoff inbox, live: Server-Sent Events telling a dashboard page to re-fetch (#16).

``GET /conversations/stream`` (the inbox's lists) and ``GET /conversations/{id}/stream``
(one conversation) answer ``text/event-stream``. An event carries no HTML, only
``event: changed`` (and ``event: closed`` when a watched conversation closes): the page
then re-fetches the fragment it already polls (``/conversations/rows``,
``/conversations/{id}/live``). That keeps one renderer, and every fragment request is
authenticated and role-checked as it is today, so a stream that outlives a member's
session or role shows nothing; the stream itself holds no database connection.

The wake-up is the one agents already get at the ledger: whoever appends events publishes
``{tenant}:{conversation}`` on `frontdoor_conversations.wakeups.CHANNEL` (the ledger, the
company API, this console). Each console process keeps one subscription and wakes its
streams: the inbox on any change in its tenant, a conversation's page on that
conversation. Text deltas on the same channel are ignored (the transcript shows complete
messages). A burst of changes is one event, at most one a second per stream.

Streams are bounded: a heartbeat comment every 15 s, ``retry: 3000``, an end after 5 minutes
(the browser reconnects, so load balancers and deploys recycle them), an end at once when the
process is told to stop (``: restarting``, then the end: SIGTERM reaches the stream through
`frontdoor_httpkit.shutdown_notice` before the server waits for open responses, so a
deploy is not held for minutes; the browser reconnects to another process), and at most
`MEMBER_STREAMS` open per member and `TENANT_STREAMS` per tenant across every console
process (leases in Redis that expire on their own if a process dies): beyond that ``429``,
and the page polls every 2 seconds instead.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Final

import msgspec
import redis.asyncio as aioredis
from frontdoor_conversations import inbox
from frontdoor_conversations.wakeups import CHANNEL
from frontdoor_core.channel_listener import ChannelListener
from frontdoor_core.logging import get_logger
from frontdoor_core.readers import ReaderRegistry
from frontdoor_core.redis_keys import shard
from frontdoor_httpkit import ShutdownNotice, shutdown_notice
from litestar import Response, get
from litestar.background_tasks import BackgroundTask
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.response import Stream

from .deps import ctx_of
from .page import Console

__all__ = ["MEMBER_STREAMS", "TENANT_STREAMS", "ConversationStreams", "routes", "streams_of"]

MEMBER_STREAMS: Final = 4
"""A browser opens at most 6 HTTP/1.1 connections to one origin: beyond 4 tabs, pages poll and 2 stay free."""
TENANT_STREAMS: Final = 200
LIFETIME_SECONDS: Final = 300.0
HEARTBEAT_SECONDS: Final = 15.0
RETRY_MS: Final = 3000
LAST_FRAME: Final = b": restarting\n\n"
"""What a stream ends with when its process stops (the lifespan's shutdown, or SIGTERM)."""
_COALESCE_SECONDS = 0.1  # a change's own echo through Redis lands in the same event
_MIN_GAP_SECONDS = 1.0
_LEASE_GRACE_SECONDS = 60.0
_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
_log = get_logger("frontdoor.console")


class TooManyStreams(Exception):
    """The member or the tenant has as many live streams open as allowed."""


class _Reader:
    __slots__ = ("changed",)

    def __init__(self) -> None:
        self.changed = asyncio.Event()


class ConversationStreams:
    """This process's live inbox streams: their wake-ups (one Redis subscription) and leases.

    Args:
        redis: The client to subscribe and keep leases with.
        clock: Seconds since the epoch, for lease expiry (every process's clock).
        notice: Tells the streams that the process was told to stop (the process's own by default).
    """

    def __init__(self, redis: aioredis.Redis, *, clock: Callable[[], float] = time.time,
                 notice: ShutdownNotice = shutdown_notice) -> None:
        self._redis = redis
        self._clock = clock
        self._notice = notice
        self._readers: ReaderRegistry[_Reader] = ReaderRegistry(_Reader)
        self._closing = False
        self._listener = ChannelListener(redis, CHANNEL, self._dispatch, name="console-conversation-streams",
                                         log=_log, retry_event="conversation_streams.listener_retry")
        self.lifetime = LIFETIME_SECONDS
        self.heartbeat = HEARTBEAT_SECONDS
        self.per_member = MEMBER_STREAMS
        self.per_tenant = TENANT_STREAMS

    async def start(self) -> None:
        await self._listener.start()

    async def stop(self) -> None:
        """End every open stream (their clients reconnect elsewhere) and stop listening."""
        self._closing = True
        self._readers.wake_all()
        await self._listener.stop()

    @property
    def open_streams(self) -> int:
        return len(self._readers)

    def _dispatch(self, data: Any) -> None:
        try:
            note = msgspec.json.decode(data if isinstance(data, bytes) else str(data).encode())
            key = str(note["k"])
        except (msgspec.DecodeError, KeyError, TypeError):
            return
        if "d" not in note:  # a text delta changes nothing the dashboard shows
            self._wake(key)

    def _wake(self, key: str) -> None:
        tenant_id, _, _ = key.partition(":")
        self._readers.wake(tenant_id, key)

    def wake(self, tenant_id: str, conversation_id: str) -> None:
        """Wake this process's streams of the conversation and of its tenant's inbox."""
        self._wake(f"{tenant_id}:{conversation_id}")

    # ------------------------------------------------------------ leases

    @staticmethod
    def _lease_keys(tenant_id: str, admin_id: str) -> tuple[str, str]:
        tag = shard(tenant_id)  # both keys in one slot: one MULTI on a Redis Cluster
        return f"console:streams:{tag}:member:{admin_id}", f"console:streams:{tag}:tenant"

    async def acquire(self, tenant_id: str, admin_id: str) -> str:
        """A lease on one of the member's and the tenant's streams.

        Raises:
            TooManyStreams: The member or the tenant has its allowance open already.
            redis.RedisError: Redis is unavailable (no wake-ups either).
        """
        lease = secrets.token_hex(12)
        member, tenant = self._lease_keys(tenant_id, admin_id)
        now = self._clock()
        ttl = int(self.lifetime + _LEASE_GRACE_SECONDS) + 1
        async with self._redis.pipeline(transaction=True) as pipe:
            for key in (member, tenant):
                pipe.zremrangebyscore(key, "-inf", now)  # leases of a process that died
                pipe.zadd(key, {lease: now + ttl})
                pipe.zcard(key)
                pipe.expire(key, ttl)
            answers = await pipe.execute()
        if int(answers[2]) > self.per_member or int(answers[6]) > self.per_tenant:
            await self.release(tenant_id, admin_id, lease)
            raise TooManyStreams
        return lease

    async def release(self, tenant_id: str, admin_id: str, lease: str) -> None:
        member, tenant = self._lease_keys(tenant_id, admin_id)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.zrem(member, lease)
                pipe.zrem(tenant, lease)
                await pipe.execute()
        except Exception:  # it expires by itself
            _log.warning("conversation_streams.release_failed")

    # ------------------------------------------------------------ the stream

    async def frames(self, key: str, data: str, *,
                     still_open: Callable[[], Awaitable[bool]] | None = None) -> AsyncGenerator[bytes, None]:
        """``retry`` advice, then ``changed`` events and heartbeats until the lifetime ends."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.lifetime
        last = float("-inf")
        with self._readers.subscribe(key) as reader, self._notice.wakes(reader.changed):
            yield f"retry: {RETRY_MS}\n: live\n\n".encode()
            while True:
                if self._closing or self._notice.begun:
                    yield LAST_FRAME
                    return
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                try:
                    async with asyncio.timeout(min(self.heartbeat, remaining)):
                        await reader.changed.wait()
                except TimeoutError:
                    if deadline - loop.time() > 0:
                        yield b": keep-alive\n\n"
                    continue
                if self._closing or self._notice.begun:
                    continue  # the last frame, then the end
                await asyncio.sleep(max(_COALESCE_SECONDS, last + _MIN_GAP_SECONDS - loop.time()))
                reader.changed.clear()
                last = loop.time()
                yield f"event: changed\ndata: {data}\n\n".encode()
                if still_open is not None and not await still_open():
                    yield f"event: closed\ndata: {data}\n\n".encode()
                    return


def streams_of(state: State) -> ConversationStreams:
    streams: ConversationStreams = state.conversation_streams
    return streams


async def _stream(console: Console, state: State, key: str, data: str,
                  still_open: Callable[[], Awaitable[bool]] | None = None) -> Response[Any]:
    streams = streams_of(state)
    tenant_id, admin_id = console.tenant.id, console.actor.id or ""
    try:
        lease = await streams.acquire(tenant_id, admin_id)
    except TooManyStreams:
        return Response("Too many live views are open: this page refreshes every 2 seconds instead.\n",
                        status_code=429, media_type="text/plain", headers={**_HEADERS, "Retry-After": "60"})
    except aioredis.RedisError:
        _log.warning("conversation_streams.unavailable")
        return Response("Live updates are unavailable: this page refreshes every 2 seconds instead.\n",
                        status_code=503, media_type="text/plain", headers={**_HEADERS, "Retry-After": "30"})
    frames = streams.frames(key, data, still_open=still_open)

    async def finish() -> None:
        # After the response: the client went away, or the stream ended. Close the generator
        # now (it may be suspended at a yield) and give the lease back.
        await frames.aclose()
        await streams.release(tenant_id, admin_id, lease)

    return Stream(frames, media_type="text/event-stream", headers=_HEADERS, background=BackgroundTask(finish))


@get("/conversations/stream")
async def inbox_stream(console: Console, state: State) -> Response[Any]:
    """The tenant's inbox changed: re-fetch the list (any view)."""
    return await _stream(console, state, console.tenant.id, "inbox")


@get("/conversations/{conversation_id:str}/stream")
async def conversation_stream(conversation_id: FromPath[str], console: Console, state: State) -> Response[Any]:
    """This conversation changed: re-fetch its state and transcript. 404 for another tenant's.

    A closed conversation answers ``204``: an EventSource stops reconnecting (nothing more
    will happen to it); one that closes while watched gets ``event: closed`` and the end.
    """
    pool = ctx_of(state).pool
    async with pool.acquire() as conn:
        conversation = await inbox.get(conn, console.tenant.id, conversation_id[:64])
    if conversation.status == "closed":
        return Response(b"", status_code=204, headers=_HEADERS)

    async def still_open() -> bool:
        async with pool.acquire() as conn:
            current = await inbox.get(conn, console.tenant.id, conversation.id)
        return bool(current.status != "closed")

    return await _stream(console, state, f"{console.tenant.id}:{conversation.id}", conversation.id, still_open)


routes: list[Any] = [inbox_stream, conversation_stream]
