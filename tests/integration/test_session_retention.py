"""Sessions and sign-in attempts past retention are deleted in chunks (issue #15, ADR 0007).

On a fresh migrated database, two tenants: ended and idle Sessions and ended attempts older
than the retention are deleted once the tenant's funnel rollup closed their days; live
recent Sessions, recently ended ones, undecided attempts not yet expired, rows of a day the funnel
rollup has not closed, and Sessions of a month billing has not counted to its end stay. The chunks respect their limit and the time budget, the prune
runs twice (at once and again) without harm, and its statements use an index.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from frontdoor_sessions import session_retention
from frontdoor_sessions.session_retention import (
    prune_session_chunk,
    prune_sessions,
    prune_sign_in_attempt_chunk,
    prune_sign_in_attempts,
)

from tests.support.databases import connected, own_database
from tests.support.servers import Servers

RETENTION = timedelta(days=90)
NOW = datetime(2027, 6, 1, 12, tzinfo=UTC)
TENANTS = ("ten_r1", "ten_r2")


@pytest.fixture
async def url(servers: Servers) -> AsyncIterator[str]:
    async with own_database(servers, "fd_session_retention") as url:
        async with connected(url) as c:
            for t in TENANTS:
                await c.execute("INSERT INTO tenants (id, slug, organization_name, created_at) VALUES ($1, $1, $1, $2)",
                                t, NOW - timedelta(days=400))
        yield url


@pytest.fixture
async def conn(url: str) -> AsyncIterator[asyncpg.Connection]:
    async with connected(url) as c:
        yield c


async def _session(conn: asyncpg.Connection, tenant: str, sid: str, *, created: timedelta, used: timedelta,
                   ended: timedelta | None = None) -> None:
    await conn.execute(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at, ended_at)"
        " VALUES ($1, $2, 'https://agent.example', 'u', $3, $4, $5)",
        tenant, sid, NOW - created, NOW - used, None if ended is None else NOW - ended)


async def _attempt(conn: asyncpg.Connection, tenant: str, aid: str, *, created: timedelta, expires: timedelta,
                   decided: timedelta | None = None) -> None:
    await conn.execute(
        "INSERT INTO sign_in_attempts (tenant_id, id, client_id, type, created_at, expires_at, decided_at, allowed)"
        " VALUES ($1, $2, 'https://agent.example', 'device', $3, $4, $5, $6)",
        tenant, aid, NOW - created, NOW - expires, None if decided is None else NOW - decided,
        None if decided is None else True)


async def _mark(conn: asyncpg.Connection, tenant: str, through: datetime) -> None:
    await conn.execute("INSERT INTO agent_funnel_marks (tenant_id, counted_through) VALUES ($1, $2)"
                       " ON CONFLICT (tenant_id) DO UPDATE SET counted_through = $2", tenant, through.date())


async def _billing(conn: asyncpg.Connection, tenant: str, through: datetime) -> None:
    await conn.execute("INSERT INTO billing_usage_marks (tenant_id, counted_through) VALUES ($1, $2)"
                       " ON CONFLICT (tenant_id) DO UPDATE SET counted_through = $2", tenant, through.date())


async def _ids(conn: asyncpg.Connection, table: str) -> set[tuple[str, str]]:
    return {(r["tenant_id"], r["id"]) for r in await conn.fetch(f"SELECT tenant_id, id FROM {table}")}


D = timedelta(days=1)


async def test_sessions_past_retention_go_and_live_recent_ones_stay(url: str, conn: asyncpg.Connection) -> None:
    for t in TENANTS:
        await _billing(conn, t, NOW - 2 * D)
    for t in TENANTS:
        await _session(conn, t, "ended_old", created=200 * D, used=100 * D, ended=95 * D)
        await _session(conn, t, "idle_old", created=300 * D, used=91 * D)           # live, idle past retention
        await _session(conn, t, "live_recent", created=300 * D, used=1 * D)        # old but renewed yesterday
        await _session(conn, t, "ended_recent", created=200 * D, used=89 * D, ended=89 * D)
        await _session(conn, t, "used_after_end", created=200 * D, used=10 * D, ended=95 * D)
    await _mark(conn, TENANTS[0], NOW - 2 * D)
    await _mark(conn, TENANTS[1], NOW - 93 * D)  # rollup behind: days after the mark are still counted live
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        first, second = await asyncio.gather(prune_sessions(pool, NOW, RETENTION, limit=1),
                                             prune_sessions(pool, NOW, RETENTION, limit=1))
        assert first + second == 3  # both of ten_r1, ten_r2's ended_old only; each deleted once
        assert await prune_sessions(pool, NOW, RETENTION) == 0  # safe to run again
    finally:
        await pool.close()
    left = await _ids(conn, "pap_sessions")
    assert ("ten_r1", "ended_old") not in left and ("ten_r1", "idle_old") not in left
    assert ("ten_r2", "ended_old") not in left
    assert ("ten_r2", "idle_old") in left  # its last day (91 days ago) is after the rollup's mark
    for t in TENANTS:
        assert {(t, "live_recent"), (t, "ended_recent"), (t, "used_after_end")} <= left
    await _mark(conn, TENANTS[1], NOW - 2 * D)
    assert await prune_session_chunk(conn, NOW, RETENTION) == 1
    assert ("ten_r2", "idle_old") not in await _ids(conn, "pap_sessions")
    assert await prune_session_chunk(conn, NOW, timedelta(0)) == 0  # no retention: nothing deleted


async def test_a_session_stays_until_the_funnel_and_billing_counted_its_days(conn: asyncpg.Connection) -> None:
    for t in TENANTS:
        await _session(conn, t, "ended_old", created=200 * D, used=100 * D, ended=95 * D)
    await _billing(conn, "ten_r1", NOW - 2 * D)   # no funnel mark: the funnel never closed a day
    await _mark(conn, "ten_r2", NOW - 2 * D)      # no billing mark: billing never counted a day
    assert await prune_session_chunk(conn, NOW, RETENTION) == 0
    # billing counted up to the day before the last of the month the Session started in: kept
    created = NOW - 200 * D
    month_end = (created.replace(day=1) + 32 * D).replace(day=1) - D
    await _billing(conn, "ten_r2", month_end - D)
    assert await prune_session_chunk(conn, NOW, RETENTION) == 0
    await _billing(conn, "ten_r2", month_end)
    assert await prune_session_chunk(conn, NOW, RETENTION) == 1
    assert await _ids(conn, "pap_sessions") == {("ten_r1", "ended_old")}


async def test_chunks_respect_their_limit_and_the_budget(url: str, conn: asyncpg.Connection) -> None:
    await conn.execute(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at, ended_at)"
        " SELECT $1, 'ses_' || i, 'https://agent.example', 'u', $2::timestamptz,"
        " $2::timestamptz + i * interval '1 minute', $2::timestamptz + i * interval '1 minute'"
        " FROM generate_series(1, 50) i", "ten_r1", NOW - 200 * D)
    await _mark(conn, "ten_r1", NOW - 2 * D)
    await _billing(conn, "ten_r1", NOW - 2 * D)
    assert await prune_session_chunk(conn, NOW, RETENTION, limit=7) == 7
    oldest = await conn.fetchval("SELECT min(ended_at) FROM pap_sessions")
    assert oldest == NOW - 200 * D + timedelta(minutes=8)  # oldest first
    pool = await asyncpg.create_pool(url, min_size=1, max_size=1)
    try:
        assert await prune_sessions(pool, NOW, RETENTION, limit=5, budget_s=0.0) == 5  # budget spent: one chunk
        assert await prune_sessions(pool, NOW, RETENTION, limit=5) == 38  # to the end, short last chunk
    finally:
        await pool.close()
    assert await conn.fetchval("SELECT count(*) FROM pap_sessions") == 0


async def test_attempts_ended_past_retention_go(url: str, conn: asyncpg.Connection) -> None:
    for t in TENANTS:
        await _attempt(conn, t, "decided_old", created=100 * D, expires=99 * D, decided=99 * D)
        await _attempt(conn, t, "expired_old", created=100 * D, expires=95 * D)
        await _attempt(conn, t, "decided_recent", created=10 * D, expires=9 * D, decided=9 * D)
        await _attempt(conn, t, "pending", created=timedelta(minutes=1), expires=-timedelta(minutes=9))
    await _mark(conn, TENANTS[0], NOW - 2 * D)
    await _mark(conn, TENANTS[1], NOW - 97 * D)  # closed 99 days ago, not 95
    assert await prune_sign_in_attempt_chunk(conn, NOW, RETENTION, limit=1) == 1
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        assert await prune_sign_in_attempts(pool, NOW, RETENTION) == 2
        assert await prune_sign_in_attempts(pool, NOW, RETENTION) == 0
    finally:
        await pool.close()
    left = await _ids(conn, "sign_in_attempts")
    assert left == {("ten_r1", "decided_recent"), ("ten_r1", "pending"),
                    ("ten_r2", "expired_old"), ("ten_r2", "decided_recent"), ("ten_r2", "pending")}


@pytest.mark.parametrize(("index", "sql"), [("pap_sessions_last_activity", session_retention._SESSIONS),
                                            ("sign_in_attempts_ended", session_retention._ATTEMPTS)])
async def test_the_prune_uses_an_index(conn: asyncpg.Connection, index: str, sql: str) -> None:
    """No Seq Scan on the big table (with enable_seqscan off, one remains only if no index serves it)."""
    await conn.execute("SET enable_seqscan = off")
    plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", NOW - RETENTION, 5000))

    def nodes(n: dict[str, object]) -> list[dict[str, object]]:
        return [n, *(m for c in n.get("Plans", []) for m in nodes(c))]  # type: ignore[attr-defined]

    scans = [n for n in nodes(plan[0]["Plan"]) if n.get("Node Type") == "Seq Scan"]
    assert scans == []
    assert index in {n.get("Index Name") for n in nodes(plan[0]["Plan"])}  # migration 20261231080000
