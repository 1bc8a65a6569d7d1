"""How far behind delivery is: due webhook messages and the age of the oldest (for metrics)."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

__all__ = ["Backlog", "backlog"]


class Backlog(msgspec.Struct, frozen=True, kw_only=True):
    """Due, undelivered messages (counted up to a cap) and how long the oldest has been due."""

    due: int
    lag_seconds: float


async def backlog(conn: asyncpg.Connection, now: datetime, *, cap: int = 10_000) -> Backlog:
    """Pending, unparked messages due at ``now``, across tenants (an operator's view).

    A parked message waits for its disabled endpoint and is not counted (it is not late:
    nothing may be sent to it). Both statements walk the due index and stop early.
    """
    due = await conn.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM webhook_messages"
        " WHERE state = 'pending' AND NOT parked AND next_attempt_at <= $1 LIMIT $2) AS d",
        now, cap,
    )
    oldest = await conn.fetchval(
        "SELECT min(next_attempt_at) FROM webhook_messages WHERE state = 'pending' AND NOT parked"
        " AND next_attempt_at <= $1",
        now,
    )
    lag = 0.0 if oldest is None else max((now - oldest).total_seconds(), 0.0)
    return Backlog(due=int(due), lag_seconds=lag)
