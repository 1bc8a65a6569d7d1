"""webhook_attempts' monthly partitions and the audit log's retention (issue #15 §3).

On a fresh database (migrated, a small ``scale_seed``): the migration leaves the table
partitioned by month with a DEFAULT partition; `maintain` makes the coming months, moves what
DEFAULT caught into its month, drops months past retention and is idempotent; the audit prune
deletes only entries past retention, of every tenant, in chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from frontdoor_devstack.scale_seed import ScalePlan
from frontdoor_tenancy.audit_retention import prune_audit, prune_audit_chunk
from frontdoor_webhooks.attempt_partitions import maintain, month_start, partition_name

from tests.support.databases import connected, own_database, seed_scale
from tests.support.servers import Servers

PLAN = ScalePlan(tenants=2, sessions=20, operations=20, attempts=400, messages=100, agents_per_tenant=1,
                 audit_per_tenant=10, days=90, prefix="p")


@pytest.fixture
async def url(servers: Servers, kek_value: str) -> AsyncIterator[str]:
    """A fresh database on the worker's server, migrated and seeded; dropped afterwards."""
    async with own_database(servers, "fd_partitions") as url:
        await seed_scale(url, PLAN, kek_value)
        yield url


@pytest.fixture
async def conn(url: str) -> AsyncIterator[asyncpg.Connection]:
    async with connected(url) as c:
        yield c


async def partitions(conn: asyncpg.Connection) -> set[str]:
    rows = await conn.fetch("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                            " WHERE i.inhparent = 'webhook_attempts'::regclass")
    return {r["relname"] for r in rows}


def months(start: datetime, n: int) -> list[datetime]:
    out = [month_start(start)]
    for _ in range(n - 1):
        last = out[-1]
        out.append(datetime(last.year + last.month // 12, last.month % 12 + 1, 1, tzinfo=UTC))
    return out


async def test_the_migration_partitions_attempts_by_month(conn: asyncpg.Connection) -> None:
    now = datetime.now(UTC)
    kind = await conn.fetchval("SELECT relkind FROM pg_class WHERE relname = 'webhook_attempts'")
    assert kind in ("p", b"p")  # relkind is a "char"
    names = await partitions(conn)
    assert "webhook_attempts_default" in names
    assert {partition_name(m) for m in months(now, 4)} <= names  # this month and three ahead
    # the seed's 90 days of attempts landed in their months, none in DEFAULT
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts") == PLAN.attempts
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts_default") == 0
    placed = await conn.fetch("SELECT DISTINCT tableoid::regclass::text AS p FROM webhook_attempts")
    assert len(placed) >= 3


async def test_maintain_creates_moves_drops_and_is_idempotent(conn: asyncpg.Connection) -> None:
    now = datetime.now(UTC)
    later = months(now, 7)[6] + timedelta(days=3)  # six months ahead: beyond the partitions made
    await conn.execute(
        "INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url, started_at, duration_ms,"
        " request_headers) SELECT tenant_id, 'att_future', message_id, endpoint_id, 9, url, $1, 1, request_headers"
        " FROM webhook_attempts ORDER BY id LIMIT 1", later)
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts_default") == 1
    old_before = await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE started_at < $1",
                                     month_start(later - timedelta(days=60)))
    assert old_before == PLAN.attempts  # every seeded attempt is older than the new cutoff

    result = await maintain(conn, later, timedelta(days=60))

    assert partition_name(month_start(later)) in result.created
    assert result.moved_rows == 1
    where = await conn.fetchval("SELECT tableoid::regclass::text FROM webhook_attempts WHERE id = 'att_future'")
    assert where == partition_name(month_start(later))
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts_default") == 0
    names = await partitions(conn)
    assert {partition_name(m) for m in months(later, 4)} <= names
    for dropped in result.dropped:
        assert dropped not in names
    cutoff = later - timedelta(days=60)
    assert all(datetime.strptime(d[-6:], "%Y%m").replace(tzinfo=UTC) < month_start(cutoff) for d in result.dropped)
    assert result.dropped  # the seeded months ended long before the cutoff
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE started_at < $1",
                               month_start(cutoff)) == 0
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE id = 'att_future'") == 1

    again = await maintain(conn, later, timedelta(days=60))
    assert (again.created, again.dropped, again.moved_rows) == ([], [], 0)


async def test_attempts_still_follow_their_message(conn: asyncpg.Connection) -> None:
    """The foreign key still cascades: a pruned message takes its attempts from every partition."""
    message = await conn.fetchval("SELECT message_id FROM webhook_attempts GROUP BY message_id"
                                  " HAVING count(DISTINCT tableoid) >= 1 ORDER BY message_id LIMIT 1")
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE message_id = $1", message) > 0
    await conn.execute("DELETE FROM webhook_messages WHERE id = $1", message)
    assert await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE message_id = $1", message) == 0


async def test_audit_prune_deletes_only_entries_past_retention_of_every_tenant(conn: asyncpg.Connection,
                                                                                   url: str) -> None:
    now = datetime.now(UTC)
    # the seed wrote 10 entries per tenant, 1..10 days old, for both tenants
    per_tenant = await conn.fetch("SELECT tenant_id, count(*) AS n FROM audit_log WHERE tenant_id LIKE 'ten_p%'"
                                  " GROUP BY tenant_id")
    assert sorted(r["n"] for r in per_tenant) == [10, 10]
    assert await prune_audit_chunk(conn, now, timedelta(days=5) + timedelta(hours=1), limit=3) == 3
    remaining_old = await conn.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id LIKE 'ten_p%' AND at < $1",
                                        now - timedelta(days=5, hours=1))
    assert remaining_old == 10 - 3  # 5 of each tenant were past retention (days 6..10); 3 deleted, oldest first

    pool = await asyncpg.create_pool(url, min_size=1, max_size=1)
    try:
        deleted = await prune_audit(pool, now, timedelta(days=5, hours=1), limit=2)
    finally:
        await pool.close()
    assert deleted == 7
    left = await conn.fetch("SELECT tenant_id, count(*) AS n, min(at) AS oldest FROM audit_log"
                            " WHERE tenant_id LIKE 'ten_p%' GROUP BY tenant_id")
    assert sorted(r["n"] for r in left) == [5, 5]  # days 1..5 of both tenants stay
    assert all(r["oldest"] >= now - timedelta(days=5, hours=1) for r in left)
    assert await prune_audit_chunk(conn, now, timedelta(0)) == 0  # no retention: nothing deleted

