"""Shared Signals streams (ADR 0005): one per receiver, the company sdk's process.

A stream delivers the tenant's ``session_events`` in ``stream_seq`` order (dense, commit
order) by RFC 8936 poll. Its row holds:

- ``acked_seq``: every event up to it was acknowledged (applied by the receiver), or the
  receiver dropped its memory at that point (a ``resync``);
- ``lease_until`` (PostgreSQL's clock): until when the receiver may answer from memory.
  Each poll that is not ``behind`` renews it; the sdk counts its own lease from the moment
  it *sent* that poll, so its lease always ends first;
- ``behind``: a revoke did not get this stream's acknowledgement in time. A behind stream
  gets no lease until its receiver drops its memory and says so (``resync``).

:func:`await_streams` is what makes "the next request is refused" exact: a revoking
request, after its commit, waits until every stream with a running lease acknowledged
the tenant's latest event, or else marks it behind and waits for its lease to run out.
Every query is scoped by ``tenant_id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

from .introspection_cache import publish_head
from .session_events import EVENTS_CHANNEL

__all__ = ["PollState", "StoredEvent", "Stream", "StreamPolicy", "StreamWakeups", "acknowledge", "await_streams",
           "create_stream", "events_after", "find_stream", "grant_lease", "head_seq"]

_ACK_POLL_S: Final = 0.01
_LEASE_MARGIN_S: Final = 0.05


class StreamPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """The stream's timings.

    Attributes:
        hold: Seconds a poll without events is held open before it answers empty (the
            heartbeat); it must be well under ``lease``.
        lease: Seconds a live poll lets the receiver answer from memory.
        ack_wait: Seconds a revoke waits for acknowledgements before it marks the streams
            that did not answer behind (and then waits for their leases to run out).
        max_events: The most SETs one poll answers.
    """

    hold: float = 2.0
    lease: float = 5.0
    ack_wait: float = 1.0
    max_events: int = 100


class Stream(msgspec.Struct, frozen=True, kw_only=True):
    tenant_id: str
    id: str
    credential_id: str
    created_at: datetime
    acked_seq: int
    behind: bool


class StoredEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One ``session_events`` row at its stream position."""

    id: str
    type: str
    payload: dict[str, Any]
    seq: int
    created_at: datetime


class PollState(msgspec.Struct, frozen=True, kw_only=True):
    """A stream after a poll's acknowledgements: ``behind`` streams get no lease."""

    acked_seq: int
    behind: bool


async def head_seq(conn: asyncpg.Connection, tenant_id: str) -> int:
    """The tenant's latest committed ``stream_seq`` (0 before any event)."""
    seq = await conn.fetchval("SELECT seq FROM session_event_counters WHERE tenant_id = $1", tenant_id)
    return int(seq or 0)


async def create_stream(conn: asyncpg.Connection, tenant_id: str, credential_id: str) -> Stream:
    """A new stream for a receiver authenticated by ``credential_id``, starting at the head.

    Streams whose lease ran out more than a day ago (receivers that went away) are deleted.
    """
    await conn.execute(
        "DELETE FROM ssf_streams WHERE tenant_id = $1"
        " AND coalesce(lease_until, created_at) < now() - interval '1 day'", tenant_id)
    row = await conn.fetchrow(
        "INSERT INTO ssf_streams (tenant_id, id, credential_id, acked_seq) VALUES ($1, $2, $3, $4)"
        " RETURNING tenant_id, id, credential_id, created_at, acked_seq, behind", tenant_id, new_id("sst"), credential_id, await head_seq(conn, tenant_id))
    return Stream(**dict(row))


async def find_stream(conn: asyncpg.Connection, tenant_id: str, stream_id: str, credential_id: str) -> Stream | None:
    """The stream, if it belongs to this tenant and this credential."""
    row = await conn.fetchrow(
        "SELECT tenant_id, id, credential_id, created_at, acked_seq, behind FROM ssf_streams WHERE tenant_id = $1 AND id = $2 AND credential_id = $3",
        tenant_id, stream_id, credential_id)
    return None if row is None else Stream(**dict(row))


async def acknowledge(conn: asyncpg.Connection, tenant_id: str, stream_id: str, acks: Sequence[str], *,
                      resync: int | None) -> PollState:
    """Apply a poll's ``ack`` list (RFC 8936 §2.4) and its ``resync``; run it in a transaction.

    ``acked_seq`` moves over acknowledged events only while they are contiguous: an event
    that was not acknowledged is delivered again. ``resync`` (the receiver dropped its
    memory at that position, at most the head) clears ``behind``.
    """
    row = await conn.fetchrow(
        "SELECT acked_seq, behind FROM ssf_streams WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenant_id, stream_id)
    acked, behind = int(row["acked_seq"]), bool(row["behind"])
    if resync is not None:
        acked = max(acked, min(resync, await head_seq(conn, tenant_id)))
        behind = False
    if acks:
        seqs = {int(r["stream_seq"]) for r in await conn.fetch(
            "SELECT stream_seq FROM session_events WHERE tenant_id = $1 AND id = ANY($2::text[]) AND stream_seq > $3",
            tenant_id, list(acks), acked)}
        while acked + 1 in seqs:
            acked += 1
    await conn.execute(
        "UPDATE ssf_streams SET acked_seq = $3, behind = $4, last_poll_at = now() WHERE tenant_id = $1 AND id = $2",
        tenant_id, stream_id, acked, behind)
    return PollState(acked_seq=acked, behind=behind)


async def grant_lease(conn: asyncpg.Connection, tenant_id: str, stream_id: str, lease: float) -> PollState:
    """Renew the lease unless the stream is behind (under the row lock a revoke takes too)."""
    row = await conn.fetchrow(
        "UPDATE ssf_streams SET lease_until = CASE WHEN behind THEN lease_until"
        " ELSE greatest(lease_until, clock_timestamp() + make_interval(secs => $3)) END"
        " WHERE tenant_id = $1 AND id = $2 RETURNING acked_seq, behind",
        tenant_id, stream_id, lease)
    return PollState(acked_seq=int(row["acked_seq"]), behind=bool(row["behind"]))


async def events_after(conn: asyncpg.Connection, tenant_id: str, position: int, *, limit: int) -> list[StoredEvent]:
    """The tenant's events after ``position``, in order (stream-only types included)."""
    rows = await conn.fetch(
        "SELECT id, type, payload, stream_seq AS seq, created_at FROM session_events"
        " WHERE tenant_id = $1 AND stream_seq > $2 ORDER BY stream_seq LIMIT $3",
        tenant_id, position, limit)
    return [StoredEvent(**dict(r)) for r in rows]


async def await_streams(pool: asyncpg.Pool, tenant_id: str, policy: StreamPolicy | None = None, *,
                        redis: Any) -> int:
    """After a revoke committed: return once no receiver can answer from stale memory.

    First the tenant's head is published to the introspection cache (no entry read before
    the revoke answers again). Then every stream of the tenant with a running lease must
    acknowledge that head (which includes the revoke's events) within ``policy.ack_wait``;
    the others are marked behind, so they get no new lease, and this waits until their
    current lease ran out. Returns how many streams were marked behind.
    """
    policy = policy or StreamPolicy()
    deadline = time.monotonic() + policy.ack_wait
    async with pool.acquire() as conn:
        head = await head_seq(conn, tenant_id)
        await publish_head(redis, tenant_id, head)
        while True:
            waiting = await conn.fetch(
                "SELECT behind FROM ssf_streams WHERE tenant_id = $1 AND lease_until > clock_timestamp()"
                " AND acked_seq < $2", tenant_id, head)
            if not waiting:
                return 0
            if all(r["behind"] for r in waiting) or time.monotonic() >= deadline:
                break
            await asyncio.sleep(_ACK_POLL_S)
        rows = await conn.fetch(
            "UPDATE ssf_streams SET behind = true WHERE tenant_id = $1 AND lease_until > clock_timestamp()"
            " AND acked_seq < $2 RETURNING extract(epoch FROM lease_until - clock_timestamp())::float8 AS left",
            tenant_id, head)
    longest = max((float(r["left"]) for r in rows), default=0.0)
    if longest > 0:
        await asyncio.sleep(longest + _LEASE_MARGIN_S)
    return len(rows)


class StreamWakeups:
    """Wakes held polls when any outbox row commits (``LISTEN frontdoor_events``).

    One connection per process. A lost notification or a lost connection only delays an
    answer to the end of the hold; correctness never depends on it.
    """

    def __init__(self, database_url: str) -> None:
        self._database_url = database_url
        self._generation = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    @property
    def generation(self) -> int:
        """Changes with every notification: read it before looking, wait with it after."""
        return self._generation

    async def wait(self, generation: int, hold: float) -> None:
        """Return when a notification came after ``generation`` was read, or after ``hold`` seconds."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(lambda: self._generation != generation), hold)

    def _notified(self, *_: Any) -> None:
        asyncio.get_running_loop().create_task(self._bump())

    async def _bump(self) -> None:
        async with self._changed:
            self._generation += 1
            self._changed.notify_all()

    async def _listen(self) -> None:
        while not self._closing:
            try:
                conn = await asyncpg.connect(self._database_url)
            except (OSError, asyncpg.PostgresError):
                await asyncio.sleep(1.0)
                continue
            lost = asyncio.Event()
            try:
                conn.add_termination_listener(lambda _, lost=lost: lost.set())
                await conn.add_listener(EVENTS_CHANNEL, self._notified)
                await self._bump()  # anything committed while not listening
                await lost.wait()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await asyncio.sleep(0.5)
            finally:
                if not conn.is_closed():
                    await conn.close()
