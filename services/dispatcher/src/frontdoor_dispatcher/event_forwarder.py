"""Moves the domain libraries' outbox rows into webhook messages.

The sessions library (``session_events``: sign-in, sign-out, revocation, blocking) and
the tenancy library (``outbox_events``: domain verified or suspended) sit beside or below
the webhooks library and cannot write webhook messages themselves. Each writes its own
outbox row in the transaction of the change; this forwarder, run in the deliverer (woken by
``NOTIFY frontdoor_events``), takes unforwarded rows ``FOR UPDATE SKIP LOCKED``, writes
one webhook message per subscribed endpoint with the documented payload (the row's
``sequence`` added) and marks the rows forwarded, all in one transaction: a row is
forwarded exactly once, whatever the number of deliverers or crashes. See
docs/adr/0003-event-outbox.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import asyncpg
import msgspec
import structlog
from frontdoor_sessions import session_events
from frontdoor_tenancy import outbox_events
from frontdoor_webhooks.event_payloads import payload_for
from frontdoor_webhooks.messages import enqueue_event

__all__ = ["BATCH", "EVENTS_CHANNEL", "EventForwarder", "forward_events"]

_log = structlog.get_logger("frontdoor.deliverer")
BATCH: Final = 100
EVENTS_CHANNEL: Final = session_events.EVENTS_CHANNEL


class _Event(Protocol):
    @property
    def tenant_id(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> dict[str, Any]: ...
    @property
    def sequence(self) -> int: ...
    @property
    def created_at(self) -> datetime: ...


class _Outbox(msgspec.Struct, frozen=True):
    name: str
    pending: Callable[..., Awaitable[Sequence[_Event]]]
    mark: Callable[..., Awaitable[None]]


_OUTBOXES: Final = (
    _Outbox("session_events", session_events.pending_events, session_events.mark_forwarded),
    _Outbox("outbox_events", outbox_events.pending_events, outbox_events.mark_forwarded),
)
assert session_events.EVENTS_CHANNEL == outbox_events.EVENTS_CHANNEL


async def _forward_batch(conn: asyncpg.Connection, outbox: _Outbox, now: datetime, limit: int) -> int:
    async with conn.transaction():
        events = await outbox.pending(conn, limit=limit)
        for event in events:
            try:
                data = payload_for(event.type, {**event.payload, "sequence": event.sequence})
            except (KeyError, msgspec.ValidationError) as exc:
                # A row the catalogue cannot describe is a defect; skipping it keeps the queue moving.
                _log.error("outbox_event_unforwardable", outbox=outbox.name, event_id=event.id,
                           tenant_id=event.tenant_id, event_type=event.type, error=str(exc))
                continue
            await enqueue_event(conn, event.tenant_id, event.type, data, event.created_at)
        await outbox.mark(conn, events, now=now)
    return len(events)


async def forward_events(conn: asyncpg.Connection, *, now: datetime | None = None, limit: int = BATCH) -> int:
    """Forward every unforwarded outbox row, ``limit`` per transaction; return how many.

    Run it on a connection outside any transaction (each batch commits on its own).
    """
    moved = 0
    for outbox in _OUTBOXES:
        while True:
            n = await _forward_batch(conn, outbox, now or datetime.now(UTC), limit)
            moved += n
            if n < limit:
                break
    return moved


class EventForwarder:
    """The forwarding loop, run beside the deliverer (``python -m frontdoor_dispatcher.deliverer``).

    ``LISTEN frontdoor_events`` wakes it as soon as an outbox row commits; ``idle_wake``
    seconds is the backstop for a lost notification or a restart. Several may run: the
    ``SKIP LOCKED`` claim gives each row to one of them.
    """

    def __init__(self, database_url: str, *, idle_wake: float = 2.0, limit: int = BATCH) -> None:
        self._database_url = database_url
        self._idle_wake = idle_wake
        self._limit = limit
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self.forwarded = 0

    def stop(self) -> None:
        """Finish the current batch and return from :meth:`run`."""
        self._stopping.set()
        self._wake.set()

    def _notified(self, *_: Any) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Forward until :meth:`stop`; reconnects after a PostgreSQL outage."""
        while not self._stopping.is_set():
            try:
                conn = await asyncpg.connect(self._database_url)
            except (OSError, asyncpg.PostgresError):
                _log.warning("forwarder_db_unavailable")
                await asyncio.sleep(1.0)
                continue
            try:
                for typ in ("json", "jsonb"):  # outbox payloads decode as the pool's connections do
                    await conn.set_type_codec(typ, encoder=lambda v: msgspec.json.encode(v).decode(),
                                              decoder=msgspec.json.decode, schema="pg_catalog")
                await conn.add_listener(EVENTS_CHANNEL, self._notified)
                while not self._stopping.is_set():
                    self._wake.clear()
                    self.forwarded += await forward_events(conn, limit=self._limit)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=self._idle_wake)
            except Exception as exc:  # any connection failure: reconnect, never stop
                _log.warning("forwarder_db_connection_lost", error=type(exc).__name__)
                await asyncio.sleep(0.5)
            finally:
                try:  # a connection the server cut may fail to close: drop it, never stop forwarding
                    if not conn.is_closed():
                        await asyncio.wait_for(conn.close(), 5)
                except Exception:
                    conn.terminate()
