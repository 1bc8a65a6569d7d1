"""The outbox of Session and account events, for the webhook dispatcher to deliver.

Each row is written in the transaction of the change it reports (sign-in, sign-out,
revocation), so an event exists exactly when its change was committed. Payloads hold
identifiers only: never a token, code or credential.

Types: ``session.signed_in``, ``session.signed_out``, ``account.revoked`` (a sign-in and
every Account Token rotated from it stopped working).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import asyncpg
from frontdoor_core.ids import new_id

__all__ = ["EventType", "record_event"]

EventType = Literal["session.signed_in", "session.signed_out", "account.revoked"]


async def record_event(conn: asyncpg.Connection, tenant_id: str, event_type: EventType, payload: dict[str, Any], *,
                       now: datetime) -> str:
    """Append one event in the caller's transaction; return its ID."""
    event_id = new_id("evt")
    await conn.execute(
        "INSERT INTO session_events (tenant_id, id, type, payload, created_at) VALUES ($1, $2, $3, $4, $5)",
        tenant_id, event_id, event_type, payload, now,
    )
    return event_id
