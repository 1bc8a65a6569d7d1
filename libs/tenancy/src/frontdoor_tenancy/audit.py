"""The audit log: one immutable row per admin or system action."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

from .actor import Actor

__all__ = ["AuditEntry", "list_entries", "record"]


class AuditEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One audit row as the management API shows it."""

    id: str
    at: datetime
    actor_type: str
    actor_id: str | None
    action: str
    target_type: str | None
    target_id: str | None
    request_id: str | None
    details: dict[str, Any]


async def record(
    conn: asyncpg.Connection,
    actor: Actor,
    action: str,
    *,
    target_type: str | None = None,
    target_id: str | None = None,
    details: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> str:
    """Write one row in the caller's transaction; return its ID."""
    entry_id = new_id("aud")
    await conn.execute(
        """
        INSERT INTO audit_log (tenant_id, id, at, actor_type, actor_id, action, target_type, target_id, request_id, details)
        VALUES ($1, $2, coalesce($3, now()), $4, $5, $6, $7, $8, $9, $10)
        """,
        actor.tenant_id, entry_id, at, actor.type, actor.id, action, target_type, target_id,
        actor.request_id, details or {},
    )
    return entry_id


async def list_entries(
    conn: asyncpg.Connection,
    tenant_id: str,
    *,
    limit: int = 50,
    before: str | None = None,
    action: str | None = None,
) -> list[AuditEntry]:
    """Newest first; ``before`` is the last ID of the previous page."""
    rows = await conn.fetch(
        """
        SELECT id, at, actor_type, actor_id, action, target_type, target_id, request_id, details
          FROM audit_log
         WHERE tenant_id = $1
           AND ($2::text IS NULL OR id < $2)
           AND ($3::text IS NULL OR action = $3)
         ORDER BY id DESC
         LIMIT $4
        """,
        tenant_id, before, action, limit,
    )
    return [AuditEntry(**dict(r)) for r in rows]
