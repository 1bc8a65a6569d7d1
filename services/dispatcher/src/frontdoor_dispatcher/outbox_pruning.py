"""Deletes the domain outboxes' forwarded rows once they are older than the webhook retention.

``session_events`` (sessions) and ``outbox_events`` (tenancy) keep a row after the
forwarder turned it into webhook messages (docs/adr/0003-event-outbox.md). Those
messages are pruned after ``FRONTDOOR_WEBHOOK_RETENTION``; the rows they came from go
after the same period, counted from their forwarding. Each library deletes its own rows
(``prune_forwarded``) in chunks of ``chunk``, each chunk its own short statement, so a
large backlog never holds locks for long; one run stops after ``max_chunks`` chunks per
outbox and the next run goes on. An unforwarded row is never deleted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final

import asyncpg
from frontdoor_sessions import session_events
from frontdoor_tenancy import outbox_events

__all__ = ["CHUNK", "MAX_CHUNKS", "prune_outboxes"]

CHUNK: Final = 1000
MAX_CHUNKS: Final = 100

_Prune = Callable[..., Awaitable[int]]
_OUTBOXES: Final[tuple[tuple[str, _Prune], ...]] = (
    ("session_events", session_events.prune_forwarded),
    ("outbox_events", outbox_events.prune_forwarded),
)


async def prune_outboxes(pool: asyncpg.Pool, now: datetime, retention: timedelta, *, chunk: int = CHUNK,
                         max_chunks: int = MAX_CHUNKS) -> dict[str, int]:
    """Prune every outbox; return how many rows each lost (by table name)."""
    deleted: dict[str, int] = {}
    for name, prune in _OUTBOXES:
        total = 0
        for _ in range(max_chunks):
            async with pool.acquire() as conn:
                count = await prune(conn, now, retention, limit=chunk)
            total += count
            if count < chunk:
                break
        deleted[name] = total
    return deleted
