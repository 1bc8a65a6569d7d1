"""Tenancy's event outbox: changes a company can subscribe to, written with the change.

The webhooks library sits above tenancy, so a domain check cannot write a webhook
message itself. It writes an ``outbox_events`` row in its own transaction instead, and
the dispatcher moves unforwarded rows into webhook messages, marking them forwarded in
the same transaction (docs/adr/0003-event-outbox.md). Payloads hold identifiers and
facts, never a secret. Writing one sends ``pg_notify('frontdoor_events', ...)`` at commit.

Types: ``domain.verified``, ``domain.suspended``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

__all__ = ["EVENTS_CHANNEL", "OutboxEvent", "TenancyEventType", "mark_forwarded", "pending_events", "record_event"]

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
