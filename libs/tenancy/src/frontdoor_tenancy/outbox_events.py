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

from datetime import datetime
from typing import Any, Literal

import asyncpg
from frontdoor_core.ids import new_id
from frontdoor_core.outbox import OutboxEvent, OutboxTable

__all__ = ["EVENTS_CHANNEL", "OutboxEvent", "TenancyEventType", "mark_forwarded", "pending_events", "prune_forwarded",
           "record_event"]

TenancyEventType = Literal["domain.verified", "domain.suspended"]
EVENTS_CHANNEL = "frontdoor_events"
"""The NOTIFY channel of every domain outbox (the same as the sessions library's)."""


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


_TABLE = OutboxTable("outbox_events")

pending_events = _TABLE.pending
"""Unforwarded events, oldest first, locked ``FOR UPDATE SKIP LOCKED`` (all tenants: a queue)."""
mark_forwarded = _TABLE.mark_forwarded
"""Mark events as handed to the webhooks (in the transaction that did it)."""
prune_forwarded = _TABLE.prune_forwarded
"""Delete forwarded events older than the retention, in bounded chunks (never an unforwarded one)."""
