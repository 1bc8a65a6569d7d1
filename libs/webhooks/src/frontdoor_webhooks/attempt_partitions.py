"""The monthly partitions of ``webhook_attempts``: made ahead, dropped past retention.

``webhook_attempts`` is range-partitioned by ``started_at`` (migration
``20261230010000_webhook_attempts_partitioned``), one partition per UTC month named
``webhook_attempts_pYYYYMM`` plus a DEFAULT partition. `maintain` runs daily (the
dispatcher's ``frontdoor.retention.partitions``): it makes sure the current month and the
next ``ahead`` months have a partition, moving any rows the DEFAULT partition caught for
such a month into it, and drops every month that ended longer ago than the retention.
Dropping a partition is a catalogue change, not millions of DELETEs: no dead rows, no
vacuum debt. Safe to run twice at once: a transaction-scoped advisory lock serialises runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import asyncpg

__all__ = ["MaintenanceResult", "ensure_partitions", "maintain", "month_start", "partition_name"]

TABLE = "webhook_attempts"
_NAME = re.compile(r"^webhook_attempts_p(\d{4})(\d{2})$")
_LOCK = 0x77617474  # "watt"


@dataclass
class MaintenanceResult:
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    moved_rows: int = 0


def month_start(at: datetime) -> datetime:
    """The first instant of ``at``'s UTC month."""
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def _next_month(start: datetime) -> datetime:
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)


def partition_name(start: datetime) -> str:
    return f"{TABLE}_p{start.year:04d}{start.month:02d}"


async def _partitions(conn: asyncpg.Connection) -> dict[str, datetime]:
    """Existing monthly partitions by name, with their month."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = $1::regclass", TABLE)
    out: dict[str, datetime] = {}
    for r in rows:
        m = _NAME.match(r["relname"])
        if m:
            out[r["relname"]] = datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=UTC)
    return out


async def _create(conn: asyncpg.Connection, start: datetime) -> int:
    """Create ``start``'s partition; rows the DEFAULT partition holds for that month move into it."""
    name, end = partition_name(start), _next_month(start)
    async with conn.transaction():
        # The table is created detached, filled from DEFAULT, then attached (attaching checks
        # DEFAULT holds nothing of the month any more).
        await conn.execute(f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        moved = await conn.execute(
            f"WITH m AS (DELETE FROM {TABLE}_default WHERE started_at >= $1 AND started_at < $2 RETURNING *)"  # noqa: S608
            f" INSERT INTO {name} SELECT * FROM m", start, end)
        await conn.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name}"
                           f" FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')")
    return int(moved.rsplit(" ", 1)[-1])


async def ensure_partitions(conn: asyncpg.Connection, since: datetime, until: datetime) -> MaintenanceResult:
    """A partition for every month from ``since``'s to ``until``'s (what DEFAULT holds of them moved in)."""
    result = MaintenanceResult()
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        await _ensure(conn, _months(month_start(since), month_start(until)), result)
    return result


def _months(first: datetime, last: datetime) -> list[datetime]:
    out = []
    while first <= last:
        out.append(first)
        first = _next_month(first)
    return out


async def _ensure(conn: asyncpg.Connection, months: list[datetime], result: MaintenanceResult) -> None:
    existing = await _partitions(conn)
    for start in sorted(set(months)):
        if partition_name(start) not in existing:
            result.moved_rows += await _create(conn, start)
            result.created.append(partition_name(start))


async def maintain(conn: asyncpg.Connection, now: datetime, retention: timedelta, *, ahead: int = 3
                   ) -> MaintenanceResult:
    """Partitions for this month and ``ahead`` more; months ended before ``now - retention`` dropped.

    Rows the DEFAULT partition caught for a month still within retention (the task did not
    run for a while) get their month's partition; older ones are deleted.
    """
    result = MaintenanceResult()
    cutoff = now - retention
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK)
        caught = await conn.fetch(
            f"SELECT DISTINCT date_trunc('month', started_at AT TIME ZONE 'UTC') AS m FROM {TABLE}_default"  # noqa: S608
            " WHERE started_at >= $1", month_start(cutoff))
        months = _months(month_start(now), month_start(now))
        for _ in range(ahead):
            months.append(_next_month(months[-1]))
        months += [r["m"].replace(tzinfo=UTC) for r in caught]
        await _ensure(conn, months, result)
        for name, month in sorted((await _partitions(conn)).items(), key=lambda kv: kv[1]):
            if _next_month(month) <= cutoff:
                await conn.execute(f"DROP TABLE {name}")
                result.dropped.append(name)
        # What DEFAULT still holds is from before every kept month (clock skew, a long outage
        # of this task): past retention too, so deleted rather than kept forever.
        await conn.execute(f"DELETE FROM {TABLE}_default WHERE started_at < $1", month_start(cutoff))  # noqa: S608
    return result
