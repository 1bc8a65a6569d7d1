"""Tenancy's event outbox: changes a company can subscribe to, written with the change.

The webhooks library sits above tenancy, so a domain check cannot write a webhook
message itself. It writes an ``outbox_events`` row in its own transaction instead, and
the dispatcher moves unforwarded rows into webhook messages, marking them forwarded in
the same transaction (docs/adr/0003-event-outbox.md). Payloads hold identifiers and
facts, never a secret. Writing one sends ``pg_notify('frontdoor_events', ...)`` at commit.
Forwarded rows are deleted after the webhook retention (`prune_forwarded`); unforwarded
ones never.

Types: ``domain.verified``, ``domain.suspended``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

__all__ = ["EVENTS_CHANNEL", "OutboxEvent", "TenancyEventType", "mark_forwarded", "pending_events", "prune_forwarded",
           "record_event"]

TenancyEventType = Literal["domain.verified", "domain.suspended"]
EVENTS_CHANNEL = "frontdoor_events"
"""The NOTIFY channel of every domain outbox (the same as the sessions library's)."""


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


async def record_event(conn: asyncpg.Connection, tenant_id: str, event_type: TenancyEventType,
                       payload: dict[str, Any], *, now: datetime) -> str:
    """Append one event in the caller's transaction; return its ID."""
    event_id = new_id("evt")
    await conn.execute(
        "INSERT INTO outbox_events (tenant_id, id, type, payload, created_at) VALUES ($1, $2, $3, $4, $5)",
        tenant_id, event_id, event_type, payload, now,
    )
    await conn.execute("SELECT pg_notify($1, 'outbox_events')", EVENTS_CHANNEL)
    return event_id


async def pending_events(conn: asyncpg.Connection, *, limit: int = 100) -> list[OutboxEvent]:
    """Unforwarded events, oldest first, locked ``FOR UPDATE SKIP LOCKED`` (all tenants: a queue)."""
    rows = await conn.fetch(
        "SELECT tenant_id, id, type, payload, sequence, created_at FROM outbox_events"
        " WHERE forwarded_at IS NULL ORDER BY sequence LIMIT $1 FOR UPDATE SKIP LOCKED",
        limit,
    )
    return [OutboxEvent(**dict(r)) for r in rows]


async def mark_forwarded(conn: asyncpg.Connection, events: Sequence[OutboxEvent], *, now: datetime) -> None:
    """Mark events as handed to the webhooks (in the transaction that did it)."""
    for tenant_id in {e.tenant_id for e in events}:
        await conn.execute(
            "UPDATE outbox_events SET forwarded_at = $3 WHERE tenant_id = $1 AND id = ANY($2::text[])",
            tenant_id, [e.id for e in events if e.tenant_id == tenant_id], now,
        )


async def prune_forwarded(conn: asyncpg.Connection, now: datetime, retention: timedelta, *,
                          limit: int = 1000) -> int:
    """Delete forwarded events whose forwarding is older than ``retention``, all tenants.

    A maintenance job (the dispatcher runs it hourly with the webhook retention): once a
    row is forwarded its webhook messages hold what receivers need, and those are pruned
    after the same period. An unforwarded row is never deleted, however old. At most
    ``limit`` rows per call, in one short statement: call again until it returns less
    than ``limit`` to clear a backlog.

    Returns:
        How many rows were deleted.
    """
    if limit <= 0 or retention < timedelta(0):
        raise ValueError("limit must be positive and retention not negative")
    deleted = await conn.fetchval(
        "WITH gone AS (DELETE FROM outbox_events WHERE (tenant_id, id) IN ("
        " SELECT tenant_id, id FROM outbox_events WHERE forwarded_at IS NOT NULL AND forwarded_at < $1"
        " ORDER BY forwarded_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM gone",
        now - retention, limit,
    )
    return int(deleted)
