"""The outbox of Session and account events, for the webhook dispatcher to deliver.

Each row is written in the transaction of the change it reports (sign-in, sign-out,
revocation, blocking), so an event exists exactly when its change was committed.
Payloads hold identifiers only: never a token, code or credential. Writing one also
sends ``pg_notify('frontdoor_events', ...)`` at commit, a wake-up for the dispatcher,
which moves unforwarded rows into webhook messages (`pending_events`, then
`mark_forwarded` in the same transaction; see docs/adr/0003-event-outbox.md). Forwarded
rows are deleted after the webhook retention (`prune_forwarded`); unforwarded ones never.

Types: ``session.signed_in``, ``session.signed_out``, ``account.revoked`` (a sign-in and
every Account Token rotated from it stopped working), ``agent.blocked``; and two for the
Shared Signals stream only (ADR 0005), written already forwarded because the webhook
catalogue has no such event: ``session.ended`` (a Session ended from the company's side)
and ``agent.policy_changed`` (the allowlist or the mode changed).

Every event also takes the tenant's next ``stream_seq`` (dense, in commit order: the
counter row stays locked until the transaction commits), the position the Shared
Signals stream delivers it at (:mod:`frontdoor_sessions.ssf_stream`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import asyncpg
from frontdoor_core.ids import new_id
from frontdoor_core.outbox import OutboxEvent, OutboxTable

__all__ = ["EVENTS_CHANNEL", "STREAM_ONLY", "EventType", "OutboxEvent", "mark_forwarded", "pending_events", "prune_forwarded",
           "record_event"]

EventType = Literal["session.signed_in", "session.signed_out", "account.revoked", "agent.blocked",
                    "session.ended", "agent.policy_changed"]
STREAM_ONLY: frozenset[str] = frozenset({"session.ended", "agent.policy_changed"})
"""Event types only the Shared Signals stream carries (no webhook): written forwarded."""
EVENTS_CHANNEL = "frontdoor_events"
"""The NOTIFY channel of every domain outbox (tenancy's ``outbox_events`` too)."""


async def record_event(conn: asyncpg.Connection, tenant_id: str, event_type: EventType, payload: dict[str, Any], *,
                       now: datetime) -> str:
    """Append one event in the caller's transaction; return its ID."""
    event_id = new_id("evt")
    # The counter row stays locked until commit: a tenant's stream_seq values are dense and
    # committed in order, so a receiver that saw n has seen every event up to n (ADR 0005).
    stream_seq = await conn.fetchval(
        "INSERT INTO session_event_counters (tenant_id, seq) VALUES ($1, 1)"
        " ON CONFLICT (tenant_id) DO UPDATE SET seq = session_event_counters.seq + 1 RETURNING seq",
        tenant_id,
    )
    await conn.execute(
        "INSERT INTO session_events (tenant_id, id, type, payload, created_at, stream_seq, forwarded_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        tenant_id, event_id, event_type, payload, now, stream_seq, now if event_type in STREAM_ONLY else None,
    )
    await conn.execute("SELECT pg_notify($1, 'session_events')", EVENTS_CHANNEL)
    return event_id


_TABLE = OutboxTable("session_events")

pending_events = _TABLE.pending
"""Unforwarded events, oldest first, locked ``FOR UPDATE SKIP LOCKED`` (all tenants: a queue)."""
mark_forwarded = _TABLE.mark_forwarded
"""Mark events as handed to the webhooks (in the transaction that did it)."""
prune_forwarded = _TABLE.prune_forwarded
"""Delete forwarded events older than the retention, in bounded chunks (never an unforwarded one)."""
