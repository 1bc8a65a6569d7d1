"""Read-only counts of agent traffic for the admin dashboard's overview."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

__all__ = ["SessionActivity", "session_activity"]


class SessionActivity(msgspec.Struct, frozen=True, kw_only=True):
    """Agent traffic of one tenant.

    Attributes:
        agents_seen: agents that ever authenticated (blocked-before-seen ones excluded).
        agents_blocked: agents the tenant blocks.
        live_sessions: Sessions not ended and used since ``since``.
        signed_in_sessions: of those, the ones signed in to an account.
        sessions_started: Sessions created since ``since`` (ended or not).
    """

    agents_seen: int
    agents_blocked: int
    live_sessions: int
    signed_in_sessions: int
    sessions_started: int


async def session_activity(conn: asyncpg.Connection, tenant_id: str, *, since: datetime) -> SessionActivity:
    """Count the tenant's agents and its Sessions active since ``since`` (e.g. the last 24 h)."""
    agents = await conn.fetchrow(
        """
        SELECT count(*) FILTER (WHERE first_seen_at IS NOT NULL) AS seen,
               count(*) FILTER (WHERE blocked_at IS NOT NULL) AS blocked
          FROM agents WHERE tenant_id = $1
        """,
        tenant_id,
    )
    sessions = await conn.fetchrow(
        """
        SELECT count(*) FILTER (WHERE ended_at IS NULL AND last_used_at >= $2) AS live,
               count(*) FILTER (WHERE ended_at IS NULL AND last_used_at >= $2 AND signed_in_at IS NOT NULL) AS signed_in,
               count(*) FILTER (WHERE created_at >= $2) AS started
          FROM pap_sessions WHERE tenant_id = $1 AND (last_used_at >= $2 OR created_at >= $2)
        """,
        tenant_id, since,
    )
    return SessionActivity(
        agents_seen=int(agents["seen"]), agents_blocked=int(agents["blocked"]), live_sessions=int(sessions["live"]),
        signed_in_sessions=int(sessions["signed_in"]), sessions_started=int(sessions["started"]),
    )
