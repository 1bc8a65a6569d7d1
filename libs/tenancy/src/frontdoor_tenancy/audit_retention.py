"""Audit log entries past retention are deleted, oldest first, in short chunks.

The audit log grows with admin and system actions: far slower than webhook attempts, and
read per tenant by its primary key and ``audit_log_recent``. Partitioning it by time would
put the time into its primary key and give every per-tenant read one index probe per
partition; chunked deletes on ``audit_log_at`` cost less at its size (docs/scaling.md). The
dispatcher's hourly ``frontdoor.retention.audit`` calls `prune_audit` until a chunk comes back
short or its time budget is spent, so no statement holds locks for long.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import asyncpg

__all__ = ["CHUNK", "prune_audit", "prune_audit_chunk"]

CHUNK = 5000


async def prune_audit_chunk(conn: asyncpg.Connection, now: datetime, retention: timedelta, *,
                            limit: int = CHUNK) -> int:
    """Delete up to ``limit`` of the oldest entries written before ``now - retention``; answers how many."""
    if limit <= 0 or retention <= timedelta(0):
        return 0
    status = await conn.execute(
        "DELETE FROM audit_log WHERE ctid IN (SELECT ctid FROM audit_log WHERE at < $1 ORDER BY at LIMIT $2)",
        now - retention, limit)
    return int(status.rsplit(" ", 1)[-1])


async def prune_audit(pool: asyncpg.Pool, now: datetime, retention: timedelta, *, budget_s: float = 50.0,
                      limit: int = CHUNK) -> int:
    """`prune_audit_chunk` until a chunk is short or ``budget_s`` passed; answers how many were deleted."""
    deadline = time.monotonic() + budget_s
    total = 0
    while True:
        async with pool.acquire() as conn:
            n = await prune_audit_chunk(conn, now, retention, limit=limit)
        total += n
        if n < limit or time.monotonic() >= deadline:
            return total
