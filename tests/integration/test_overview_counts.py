"""The dashboard overview's counts on seeded data equal the same counts computed from the rows.

A fresh database is migrated and seeded with ``frontdoor_devstack.scale_seed`` (40 tenants,
their operations, messages and attempts over 60 days), then varied so every branch of every
count has rows: operations moved into progress (confirmed before and after the stuck
cut-off, some flagged for attention, some both), messages pending (not tried yet, in their
first attempt, retrying after a failed attempt, some of those in flight again), endpoints
disabled and failing. For several tenants each function of ``frontdoor_operations.overview`` behind the
overview page must answer exactly what Python computes from that tenant's raw rows (stuck
by ``overview.is_stuck`` itself), under the plans the planner picks and again with
sequential scans, and bitmap scans, off (the index-only plans of the migration
``operations_overview_counts`` and ``webhook_messages_failed_at``), and once more with generic plans forced (what asyncpg's
prepared statements settle on).
"""

from __future__ import annotations

import secrets
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from frontdoor_core.migrations import apply_migrations, discover
from frontdoor_devstack.scale_seed import ScalePlan, seed, sign_up_template
from frontdoor_operations import overview

from tests.conftest import MIGRATED_PACKAGES
from tests.support.servers import Servers

PLAN = ScalePlan(tenants=40, sessions=400, operations=4_000, attempts=8_000, agents_per_tenant=2,
                 audit_per_tenant=2, prefix="v")
TENANTS = [f"ten_v{t:08d}" for t in (1, 7, 10, 23, 30)]
# The planner's choice; index plans only; generic plans (planned without the arguments).
SETTINGS: list[tuple[str, ...]] = [(), ("SET enable_seqscan = off", "SET enable_bitmapscan = off"),
                                   ("SET plan_cache_mode = force_generic_plan",)]


@pytest.fixture(scope="module")
async def seeded(servers: Servers, kek_value: str) -> AsyncIterator[str]:
    name = f"fd_overview_{secrets.token_hex(6)}"
    admin = await asyncpg.connect(servers.database_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        parts = urlsplit(servers.database_url)
        url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn, discover(MIGRATED_PACKAGES))
            template = await sign_up_template(url, kek_value)
            await seed(conn, PLAN, template_tenant_id=template, kek_value=kek_value, log=lambda _: None)
            await _vary(conn)
        finally:
            await conn.close()
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _vary(conn: asyncpg.Connection) -> None:
    """Give each count rows on both sides of its conditions (the seed's rows are all final or proposed)."""
    # In progress: confirmed from 0 to ~40 minutes ago (the cut-off is 5), every third flagged.
    await conn.execute(
        "UPDATE operations SET state = 'in_progress', finished_at = NULL, result = NULL,"
        " confirmed_at = now() - make_interval(secs => (substr(id, 5)::int % 41) * 60),"
        " attention = CASE WHEN substr(id, 5)::int % 3 = 0 THEN 'perform_unknown' END"
        " WHERE id LIKE 'op\\_v%' AND substr(id, 5)::int % 11 = 0 AND state IN ('succeeded', 'failed')")
    # Some operations created in the last 24 hours, in every state, close to the boundaries.
    await conn.execute(
        "UPDATE operations SET created_at = now() - make_interval(secs => (substr(id, 5)::int % 1440) * 61)"
        " WHERE id LIKE 'op\\_v%' AND substr(id, 5)::int % 5 = 0")
    # Pending messages: not tried yet (attempts 0); in their first attempt (claimed, a lease,
    # nothing failed: not retrying); retrying after a failed attempt (failed_at), waiting or in
    # flight again. Some finished messages failed before they finished (not retrying either).
    await conn.execute(
        "UPDATE webhook_messages SET failed_at = created_at WHERE id LIKE 'msg\\_v%' AND substr(id, 6)::int % 7 = 0")
    await conn.execute(
        "UPDATE webhook_messages SET state = 'pending', delivered_at = NULL, finished_at = NULL,"
        " attempts = substr(id, 6)::int % 3, next_attempt_at = now() + interval '1 minute',"
        " failed_at = CASE WHEN substr(id, 6)::int % 3 = 2 OR substr(id, 6)::int % 6 = 4"
        "   THEN now() - interval '1 minute' END,"
        " locked_until = CASE WHEN substr(id, 6)::int % 3 > 0 AND substr(id, 6)::int % 2 = 1"
        "   THEN now() + interval '30 seconds' END"
        " WHERE id LIKE 'msg\\_v%' AND substr(id, 6)::int % 17 = 0")
    await conn.execute(
        "UPDATE webhook_messages SET state = 'aborted', delivered_at = NULL, created_at = now() - interval '2 hours'"
        " WHERE id LIKE 'msg\\_v%' AND substr(id, 6)::int % 97 = 0")
    # Failed attempts in the last 24 hours too (the seed's newest are seconds old).
    await conn.execute(
        "UPDATE webhook_attempts SET started_at = now() - make_interval(secs => (substr(id, 6)::int % 86) * 1000)"
        " WHERE id LIKE 'att\\_v%' AND substr(id, 6)::int % 9 = 0 AND started_at >= now() - interval '30 days'")
    # Endpoints: one more per tenant, some disabled, some failing.
    await conn.execute(
        "INSERT INTO webhook_endpoints (tenant_id, id, url, event_types, created_at, updated_at, enabled, failing_since)"
        " SELECT tenant_id, id || 'b', url || '/b', event_types, created_at, updated_at,"
        " substr(id, 6)::int % 2 = 0, CASE WHEN substr(id, 6)::int % 3 = 1 THEN now() - interval '1 hour' END"
        " FROM webhook_endpoints WHERE id LIKE 'whe\\_v%'")
    await conn.execute("ANALYZE operations, webhook_messages, webhook_attempts, webhook_endpoints")


def _day(at: datetime) -> date:
    return at.astimezone(UTC).date()


async def _expected(conn: asyncpg.Connection, tenant_id: str, now: datetime) -> dict[str, Any]:
    """Every overview count for ``tenant_id`` computed in Python from the tenant's rows."""
    day_ago, month_ago = now - timedelta(hours=24), now - timedelta(days=30)
    ops = await conn.fetch("SELECT state, created_at, confirmed_at, attention FROM operations WHERE tenant_id = $1",
                           tenant_id)
    msgs = await conn.fetch("SELECT state, failed_at, created_at FROM webhook_messages"
                            " WHERE tenant_id = $1", tenant_id)
    atts = await conn.fetch("SELECT started_at, error_class FROM webhook_attempts WHERE tenant_id = $1", tenant_id)
    ends = await conn.fetch("SELECT enabled, failing_since FROM webhook_endpoints WHERE tenant_id = $1", tenant_id)
    by_state = Counter(r["state"] for r in ops if r["created_at"] >= day_ago)
    daily: dict[date, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in ops:
        if r["created_at"] >= month_ago:
            counts = daily[_day(r["created_at"])]
            counts[0] += 1
            counts[1] += r["state"] == "succeeded"
            counts[2] += r["state"] == "failed"
    failed = [r for r in msgs if r["state"] in ("exhausted", "aborted")]
    failed_attempts = [r["started_at"] for r in atts if r["error_class"] is not None and r["started_at"] >= month_ago]
    return {
        "count_by_state": {s: by_state.get(s, 0) for s in overview.STATES},
        "daily_operations": {d: overview.DailyOperations(proposed=p, succeeded=s, failed=f)
                             for d, (p, s, f) in daily.items()},
        "count_stuck": sum(overview.is_stuck(SimpleNamespace(**dict(r)), now) for r in ops),  # type: ignore[arg-type]
        "delivery_health": overview.DeliveryHealth(
            retrying=sum(r["state"] == "pending" and r["failed_at"] is not None for r in msgs),
            failed_24h=sum(r["created_at"] >= day_ago for r in failed),
            failed_30d=sum(r["created_at"] >= month_ago for r in failed),
            failed_attempts_24h=sum(at >= day_ago for at in failed_attempts),
            disabled_endpoints=sum(not r["enabled"] for r in ends),
            failing_endpoints=sum(r["enabled"] and r["failing_since"] is not None for r in ends)),
        "failed_attempts_by_day": dict(Counter(_day(at) for at in failed_attempts)),
    }


async def _actual(conn: asyncpg.Connection, tenant_id: str, now: datetime) -> dict[str, Any]:
    """The same counts as the overview page asks for them (its arguments, as console/overview passes them)."""
    return {
        "count_by_state": await overview.count_by_state(conn, tenant_id, since=now - timedelta(hours=24)),
        "daily_operations": await overview.daily_operations(conn, tenant_id, since=now - timedelta(days=30)),
        "count_stuck": await overview.count_stuck(conn, tenant_id, now=now),
        "delivery_health": await overview.delivery_health(conn, tenant_id, now=now),
        "failed_attempts_by_day": await overview.failed_attempts_by_day(conn, tenant_id,
                                                                        since=now - timedelta(days=30)),
    }


@pytest.mark.parametrize("settings", SETTINGS, ids=["planner", "index-only", "generic"])
async def test_overview_counts_equal_the_rows(seeded: str, settings: tuple[str, ...]) -> None:
    conn = await asyncpg.connect(seeded)
    try:
        for statement in settings:
            await conn.execute(statement)
        now = datetime.now(UTC)
        seen_stuck = seen_flagged_recent = 0
        healths, in_progress_24h = [], 0
        for tenant_id in TENANTS:
            expected = await _expected(conn, tenant_id, now)
            for _ in range(7):  # past the fifth execution, when a prepared statement may go generic
                assert await _actual(conn, tenant_id, now) == expected, tenant_id
            seen_stuck += expected["count_stuck"]
            healths.append(expected["delivery_health"])
            in_progress_24h += expected["count_by_state"]["in_progress"]
            seen_flagged_recent += await conn.fetchval(
                "SELECT count(*) FROM operations WHERE tenant_id = $1 AND state = 'in_progress'"
                " AND attention IS NOT NULL AND confirmed_at > $2", tenant_id, now - overview.STUCK_AFTER)
        # the data exercises both halves of count_stuck, and every other count is not all zeros
        assert seen_stuck > 0 and seen_flagged_recent > 0
        for field in overview.DeliveryHealth.__struct_fields__:
            assert sum(getattr(h, field) for h in healths) > 0, (field, healths)
        assert in_progress_24h > 0
        # Messages in their first attempt (claimed, nothing failed) are pending with attempts > 0 and
        # not retrying: the data has them, and finished messages that had failed.
        kinds = {r["kind"]: r["n"] for r in await conn.fetch(
            "SELECT CASE WHEN state = 'pending' AND attempts = 1 AND locked_until > now() AND failed_at IS NULL"
            " THEN 'first attempt' WHEN state <> 'pending' AND failed_at IS NOT NULL THEN 'finished, had failed'"
            " END AS kind, count(*) AS n FROM webhook_messages WHERE tenant_id = ANY($1) GROUP BY 1", TENANTS)}
        assert kinds.get("first attempt", 0) > 0 and kinds.get("finished, had failed", 0) > 0, kinds
    finally:
        await conn.close()


async def test_index_plans_read_the_new_indexes(seeded: str) -> None:
    """With sequential and bitmap scans off, the counts read the indexes the migrations made (index-only)."""
    conn = await asyncpg.connect(seeded)
    try:
        await conn.execute("SET enable_seqscan = off")
        await conn.execute("SET enable_bitmapscan = off")
        since = datetime.now(UTC) - timedelta(hours=24)
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN SELECT state, count(*) AS n FROM operations WHERE tenant_id = $1 AND created_at >= $2"
            " GROUP BY state", TENANTS[0], since))
        assert "Index Only Scan using operations_recent_states" in plan, plan
        indexes = {r["indexname"]: r["indexdef"] for r in await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'operations'")}
        assert "operations_recent" not in indexes  # replaced, not doubled (one index more to write per update)
        assert "WHERE ((state = 'in_progress'::text) AND (attention IS NOT NULL))" in indexes["operations_attention"]
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND state = 'pending'"
            " AND failed_at IS NOT NULL", TENANTS[0]))
        assert "Index Only Scan using webhook_messages_failed_pending" in plan, plan
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'webhook_messages'")}
        assert "webhook_messages_retrying" not in indexes  # its attempts > 0 made every claim a non-HOT update
    finally:
        await conn.close()
