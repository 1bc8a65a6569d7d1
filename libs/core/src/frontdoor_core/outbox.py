"""An event outbox table: rows written in the transaction of the change they report, then
forwarded (to webhook messages) and, once forwarded long enough, pruned.

Several libraries own one (``session_events`` in sessions, ``outbox_events`` in tenancy);
they share these mechanics. Every such table has ``tenant_id, id, type, payload, sequence,
created_at, forwarded_at``. The table name comes from the owning library's code, never from
input.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import asyncpg
import msgspec

__all__ = ["OutboxEvent", "OutboxTable"]


class OutboxEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One unforwarded event.

    Attributes:
        sequence: Increases with every event (in commit order for one object).
    """

    tenant_id: str
    id: str
    type: str
    payload: dict[str, Any]
    sequence: int
    created_at: datetime


class OutboxTable:
    """The queue operations on one outbox table (all tenants: forwarding is a queue)."""

    def __init__(self, table: str) -> None:
        if not table.isidentifier():
            raise ValueError("an outbox table is named by an identifier")
        self.table: Final = table

    async def pending(self, conn: asyncpg.Connection, *, limit: int = 100) -> list[OutboxEvent]:
        """Unforwarded events, oldest first, locked ``FOR UPDATE SKIP LOCKED``.

        Run in the transaction that forwards them and calls :meth:`mark_forwarded`.
        """
        rows = await conn.fetch(
            f"SELECT tenant_id, id, type, payload, sequence, created_at FROM {self.table}"  # noqa: S608
            " WHERE forwarded_at IS NULL ORDER BY sequence LIMIT $1 FOR UPDATE SKIP LOCKED",
            limit,
        )
        return [OutboxEvent(**dict(r)) for r in rows]

    async def depth(self, conn: asyncpg.Connection, *, cap: int = 10_000) -> int:
        """How many events wait to be forwarded, counted up to ``cap`` (a bounded scan)."""
        return int(await conn.fetchval(
            f"SELECT count(*) FROM (SELECT 1 FROM {self.table} WHERE forwarded_at IS NULL LIMIT $1) AS waiting",  # noqa: S608
            cap,
        ))

    async def mark_forwarded(self, conn: asyncpg.Connection, events: Sequence[OutboxEvent], *,
                             now: datetime) -> None:
        """Mark events as handed on (in the transaction that did it)."""
        for tenant_id in {e.tenant_id for e in events}:
            await conn.execute(
                f"UPDATE {self.table} SET forwarded_at = $3 WHERE tenant_id = $1 AND id = ANY($2::text[])",  # noqa: S608
                tenant_id, [e.id for e in events if e.tenant_id == tenant_id], now,
            )

    async def prune_forwarded(self, conn: asyncpg.Connection, now: datetime, retention: timedelta, *,
                              limit: int = 1000) -> int:
        """Delete up to ``limit`` events forwarded more than ``retention`` ago; answers how many.

        An unforwarded row is never deleted, however old. One short statement: call again
        until it returns less than ``limit`` to clear a backlog.
        """
        if limit <= 0 or retention < timedelta(0):
            raise ValueError("limit must be positive and retention not negative")
        deleted = await conn.fetchval(
            f"WITH gone AS (DELETE FROM {self.table} WHERE (tenant_id, id) IN ("  # noqa: S608
            f" SELECT tenant_id, id FROM {self.table} WHERE forwarded_at IS NOT NULL AND forwarded_at < $1"
            " ORDER BY forwarded_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM gone",
            now - retention, limit,
        )
        return int(deleted)
