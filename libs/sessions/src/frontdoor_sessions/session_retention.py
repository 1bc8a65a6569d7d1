"""Sessions and sign-in attempts past retention are deleted, oldest first, in short chunks (ADR 0007).

A Session row may go once its last activity (``greatest(last_used_at, ended_at)``: when it
ended, or, live, when it was last renewed) is older than ``FRONTDOOR_SESSION_RETENTION``. A
live Session idle that long can no longer be renewed (`renewable`, used by the Session grant:
``invalid_session`` as for an ended one), so deleting it changes nothing an agent can see.
A sign-in attempt may go once it ended (decided, or ``expires_at`` passed) longer ago than the
same retention.

Nothing that must outlive a row depends on it: the agent funnel counts a Session on the day
it started and an attempt on the days it started and ended, and a row is deleted only once
its tenant's funnel rollup (``agent_funnel_marks.counted_through``) has closed the day of its
last activity, so every day it counts in is read from ``agent_funnel_daily``. Billing reads
the current and the previous calendar month, which the settings keep inside retention (at
least 62 days). Operations, conversations and feedback carry the Session's ID as text, not a
foreign key, and keep it.

The dispatcher's hourly ``frontdoor.retention.sessions`` calls `prune_sessions` and
`prune_sign_in_attempts` until a chunk comes back short or the time budget is spent; each
chunk is one statement on the indexes of migration ``20261231080000``, safe to run twice at
once (a row deleted by the other run is simply not counted).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import asyncpg

__all__ = ["CHUNK", "prune_session_chunk", "prune_sessions", "prune_sign_in_attempt_chunk",
           "prune_sign_in_attempts", "renewable", "session_expired"]

CHUNK = 5000


def _last_activity(last_used_at: datetime, ended_at: datetime | None) -> datetime:
    return last_used_at if ended_at is None else max(last_used_at, ended_at)


def session_expired(*, last_used_at: datetime, ended_at: datetime | None, now: datetime,
                    retention: timedelta) -> bool:
    """Whether a Session's row may be deleted: its last activity is older than ``retention``
    (the prune adds that its tenant's funnel closed that day)."""
    return retention > timedelta(0) and _last_activity(last_used_at, ended_at) < now - retention


def renewable(*, last_used_at: datetime, ended_at: datetime | None, now: datetime, idle_lifetime: timedelta) -> bool:
    """Whether a Session may be renewed: live, and used within ``idle_lifetime`` (0: no bound)."""
    if ended_at is not None:
        return False
    return idle_lifetime <= timedelta(0) or last_used_at >= now - idle_lifetime


# The funnel mark is the last closed day; a row may go when its last activity is before the
# next midnight (UTC). The billing mark likewise: a Session may go once billing has counted
# every day of the month it started in (a month's active agents read the whole month's
# Sessions). No mark: that rollup never closed a day for the tenant, nothing goes.
_SESSIONS = """
DELETE FROM pap_sessions WHERE ctid IN (
  SELECT s.ctid FROM pap_sessions s
    JOIN agent_funnel_marks m ON m.tenant_id = s.tenant_id
    JOIN billing_usage_marks b ON b.tenant_id = s.tenant_id
  WHERE greatest(s.last_used_at, s.ended_at) < $1
    AND greatest(s.last_used_at, s.ended_at) < ((m.counted_through + 1)::timestamp AT TIME ZONE 'UTC')
    AND s.created_at < (date_trunc('month', (b.counted_through + 1)::timestamp) AT TIME ZONE 'UTC')
  ORDER BY greatest(s.last_used_at, s.ended_at) LIMIT $2)
"""
_ATTEMPTS = """
DELETE FROM sign_in_attempts WHERE ctid IN (
  SELECT a.ctid FROM sign_in_attempts a JOIN agent_funnel_marks m ON m.tenant_id = a.tenant_id
  WHERE coalesce(a.decided_at, a.expires_at) < $1
    AND coalesce(a.decided_at, a.expires_at) < ((m.counted_through + 1)::timestamp AT TIME ZONE 'UTC')
  ORDER BY coalesce(a.decided_at, a.expires_at) LIMIT $2)
"""


async def _chunk(conn: asyncpg.Connection, sql: str, now: datetime, retention: timedelta, limit: int) -> int:
    if limit <= 0 or retention <= timedelta(0):
        return 0
    status = await conn.execute(sql, now - retention, limit)
    return int(status.rsplit(" ", 1)[-1])


async def prune_session_chunk(conn: asyncpg.Connection, now: datetime, retention: timedelta, *,
                              limit: int = CHUNK) -> int:
    """Delete up to ``limit`` of the Sessions longest inactive past ``retention``; answers how many."""
    return await _chunk(conn, _SESSIONS, now, retention, limit)


async def prune_sign_in_attempt_chunk(conn: asyncpg.Connection, now: datetime, retention: timedelta, *,
                                      limit: int = CHUNK) -> int:
    """Delete up to ``limit`` of the attempts that ended longest before ``now - retention``; answers how many."""
    return await _chunk(conn, _ATTEMPTS, now, retention, limit)


async def _loop(pool: asyncpg.Pool, chunk: Callable[..., Awaitable[int]], now: datetime, retention: timedelta, *,
                budget_s: float, limit: int) -> int:
    deadline = time.monotonic() + budget_s
    total = 0
    while True:
        async with pool.acquire() as conn:
            n = await chunk(conn, now, retention, limit=limit)
        total += n
        if n < limit or time.monotonic() >= deadline:
            return total


async def prune_sessions(pool: asyncpg.Pool, now: datetime, retention: timedelta, *, budget_s: float = 25.0,
                         limit: int = CHUNK) -> int:
    """`prune_session_chunk` until a chunk is short or ``budget_s`` passed; answers how many were deleted."""
    return await _loop(pool, prune_session_chunk, now, retention, budget_s=budget_s, limit=limit)


async def prune_sign_in_attempts(pool: asyncpg.Pool, now: datetime, retention: timedelta, *,
                                 budget_s: float = 25.0, limit: int = CHUNK) -> int:
    """`prune_sign_in_attempt_chunk` until a chunk is short or ``budget_s`` passed; answers how many."""
    return await _loop(pool, prune_sign_in_attempt_chunk, now, retention, budget_s=budget_s, limit=limit)
