"""Read-only counts of agent traffic for the admin dashboard's overview."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import asyncpg
import msgspec

__all__ = ["SessionActivity", "SessionTrends", "session_activity", "session_trends"]


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


class SessionTrends(msgspec.Struct, frozen=True, kw_only=True):
    """Sessions started and the accounts signed in through agents, over the last 24 h and 30 days.

    Attributes:
        started_24h: Sessions created in the last 24 h.
        started_30d: Sessions created in the last 30 days.
        signed_in_users_24h: distinct accounts behind the Sessions used in the last 24 h that
            were signed in to one (``bound_account``: a Session stays bound after signing out).
        signed_in_users_30d: the same over 30 days.
        started_by_day: Sessions created per UTC day since ``days_since``; days without one omitted.
    """

    started_24h: int
    started_30d: int
    signed_in_users_24h: int
    signed_in_users_30d: int
    started_by_day: dict[date, int]


async def session_trends(conn: asyncpg.Connection, tenant_id: str, *, now: datetime,
                         days_since: datetime) -> SessionTrends:
    """Count Sessions started and signed-in accounts (24 h and 30 d), and Sessions started per UTC day.

    ``days_since`` is the first day of the daily counts (normally UTC midnight 29 days ago).
    A Session's ``last_used_at`` is never before its ``created_at``, so every condition
    also bounds ``last_used_at``: the scan is a range of ``pap_sessions_recent``
    (``tenant_id, last_used_at``), the Sessions active in the window, not the tenant's history.
    """
    h24, d30 = now - timedelta(hours=24), now - timedelta(days=30)
    totals = await conn.fetchrow(
        """
        SELECT count(*) FILTER (WHERE created_at >= $2) AS started_24h,
               count(*) FILTER (WHERE created_at >= $3) AS started_30d,
               count(DISTINCT bound_account) FILTER (WHERE last_used_at >= $2) AS users_24h,
               count(DISTINCT bound_account) FILTER (WHERE last_used_at >= $3) AS users_30d
          FROM pap_sessions WHERE tenant_id = $1 AND last_used_at >= $3
        """,
        tenant_id, h24, d30,
    )
    rows = await conn.fetch(
        """
        SELECT (date_trunc('day', created_at AT TIME ZONE 'UTC'))::date AS day, count(*) AS n
          FROM pap_sessions WHERE tenant_id = $1 AND last_used_at >= $2 AND created_at >= $2
         GROUP BY 1
        """,
        tenant_id, days_since,
    )
    return SessionTrends(started_24h=int(totals["started_24h"]), started_30d=int(totals["started_30d"]),
                         signed_in_users_24h=int(totals["users_24h"]), signed_in_users_30d=int(totals["users_30d"]),
                         started_by_day={r["day"]: int(r["n"]) for r in rows})
