"""Final operations past retention are deleted with what hangs off them (issue #15, ADR 0007 addendum).

On the shared database, through the real ledger and management API: tenant A's operations
that finished (succeeded with a delivered perform, cancelled, expired) longer ago than the
retention are gone after the prune, with their revisions, perform message and its attempts,
and the management API answers 404 ``operation_not_found`` for them; A's recent final
operation, its old one still in progress and its old proposal stay. Tenant B's old final
operation stays while B's billing has not counted its day, and goes once it has. Two runs at
once and a third run later delete each row once. The funnel the dashboard shows and the usage
billing counted are the same before and after. On a database of its own: the chunks respect
their limit, the time budget and the oldest-first order, a pending or not yet counted message
keeps its operation, and the statement uses the partial index ``operations_finished``.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from frontdoor_billing import BillingConfig, count_closed_days
from frontdoor_core.runtime import Runtime
from frontdoor_operations import ledger, retention
from frontdoor_operations.funnel import materialise_closed_days
from frontdoor_operations.retention import prune_operation_chunk, prune_operations
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_operation_pages import (
    ScriptedSender,
    add_endpoint,
    add_kind,
    add_operation,
    deliver_once,
)
from tests.support.clock import ShiftableClock
from tests.support.databases import connected, own_database
from tests.support.servers import Servers

RETENTION = timedelta(days=60)
D = timedelta(days=1)
OLD = 100 * D


async def _backdate(db: Any, tenant_id: str, operation_id: str, by: timedelta) -> None:
    """Move every timestamp of an operation, its revisions and its perform messages ``by`` into the past."""
    await db.execute(
        "UPDATE operations SET created_at = created_at - $3::interval, confirmed_at = confirmed_at - $3::interval,"
        " finished_at = finished_at - $3::interval, updated_at = updated_at - $3::interval, expires_at = expires_at - $3::interval"
        " WHERE tenant_id = $1 AND id = $2", tenant_id, operation_id, by)
    await db.execute("UPDATE operation_revisions SET created_at = created_at - $3::interval, expires_at = expires_at - $3::interval"
                     " WHERE tenant_id = $1 AND operation_id = $2", tenant_id, operation_id, by)
    await db.execute(
        "UPDATE webhook_messages SET created_at = created_at - $3::interval, delivered_at = delivered_at - $3::interval,"
        " finished_at = finished_at - $3::interval, superseded_at = superseded_at - $3::interval, next_attempt_at = next_attempt_at - $3::interval"
        " WHERE tenant_id = $1 AND operation_id = $2", tenant_id, operation_id, by)


async def _journeys(console: AsyncTestClient[Any], runtime: Runtime, t: TenantHandle, agent: str,
                    clock: ShiftableClock) -> dict[str, str]:
    """One operation per case, for ``agent``: answers their IDs by case."""
    kind = await add_kind(console, t, await add_endpoint(console, t))
    now = clock()
    ids: dict[str, str] = {}
    # Revised (revision 2), confirmed, performed through its webhook: a delivered perform with an attempt.
    performed = await add_operation(runtime, t.id, kind, client_id=agent)
    async with runtime.pool.acquire() as conn:
        r2 = await ledger.revise(conn, t.id, performed.id, summary="Now 40.00 EUR", terms={"total": {"amount": "40.00"}},
                                 now=now)
        _, message_id = await ledger.confirm(conn, t.id, performed.id, revision=r2.revision, approved_by="user",
                                             via="agent", now=now)
    assert message_id is not None
    await deliver_once(runtime, message_id, ScriptedSender((200, b'{"outcome": "succeeded", "result": {"summary": "Ordered"}}')))
    ids["performed_old"] = performed.id
    cancelled = await add_operation(runtime, t.id, kind, client_id=agent)
    expired = await add_operation(runtime, t.id, kind, client_id=agent)
    failed = await add_operation(runtime, t.id, kind, client_id=agent, confirm=True)
    async with runtime.pool.acquire() as conn:
        assert await ledger.cancel(conn, t.id, cancelled.id, now=now) is not None
        assert await ledger.expire(conn, t.id, expired.id, now=expired.expires_at) is not None
        await ledger.record_outcome(conn, t.id, failed.id, outcome="failed", result={"summary": "Sold out"}, now=now)
    ids |= {"cancelled_old": cancelled.id, "expired_old": expired.id, "failed_recent": failed.id}
    ids["in_progress_old"] = (await add_operation(runtime, t.id, kind, client_id=agent, confirm=True)).id
    ids["proposed_old"] = (await add_operation(runtime, t.id, kind, client_id=agent)).id
    async with runtime.pool.acquire() as db:
        for case, operation_id in ids.items():
            await _backdate(db, t.id, operation_id, OLD if case.endswith("_old") else 30 * D)
    return ids


async def _roll_up(runtime: Runtime, now: datetime) -> None:
    """The beat's funnel and billing rollups, run until every tenant is up to date (62 days a run)."""
    catalogue = BillingConfig.from_settings(runtime.settings).catalogue
    while await materialise_closed_days(runtime.pool, now=now):
        pass
    while await count_closed_days(runtime.pool, catalogue, now=now, billed=False):
        pass


async def _funnel(console: AsyncTestClient[Any], t: TenantHandle) -> dict[str, dict[str, str]]:
    await sign_in(console, t.email)
    r = await console.get("/analytics/funnel.csv?days=200")
    assert r.status_code == 200, r.text
    return {row["client_id"]: row for row in csv.DictReader(io.StringIO(r.text))}


async def _usage(db: Any, t: TenantHandle) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in await db.fetch(
        "SELECT day, metric, value FROM billing_usage_daily WHERE tenant_id = $1 ORDER BY day, metric", t.id)]


async def _status(console: AsyncTestClient[Any], t: TenantHandle, operation_id: str) -> int:
    r = await console.get(f"/api/v1/operations/{operation_id}", headers=t.auth)
    if r.status_code == 404:
        assert r.json()["code"] == "operation_not_found", r.text
    else:
        assert r.status_code == 200 and r.json()["operation"]["operation_id"] == operation_id, r.text
    return r.status_code


async def test_old_final_operations_go_and_every_count_stays(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime,
    clock: ShiftableClock, db: Any,
) -> None:
    now = clock()
    agent = f"https://{unique('agent-')}.example/agent.json"
    for t in (tenant, other_tenant):
        await db.execute("UPDATE tenants SET created_at = $2 WHERE id = $1", t.id, now - OLD - 10 * D)
    a = await _journeys(console, runtime, tenant, agent, clock)
    b = await _journeys(console, runtime, other_tenant, agent, clock)
    perform_message = await db.fetchval("SELECT perform_message_id FROM operations WHERE id = $1", a["performed_old"])
    assert await db.fetchval("SELECT state FROM webhook_messages WHERE id = $1", perform_message) == "delivered"
    assert await db.fetchval("SELECT count(*) FROM webhook_attempts WHERE message_id = $1", perform_message) == 1
    assert await db.fetchval("SELECT count(*) FROM operation_revisions WHERE operation_id = $1", a["performed_old"]) == 2
    await _roll_up(runtime, now)
    # B's billing is behind: it has not counted the days B's old operations finished on.
    await db.execute("UPDATE billing_usage_marks SET counted_through = $2 WHERE tenant_id = $1",
                     other_tenant.id, (now - OLD - D).date())
    funnel_before = await _funnel(console, tenant)
    assert funnel_before[agent]["proposed"] == "6" and funnel_before[agent]["performed"] == "1"
    assert funnel_before[agent]["failed"] == "1" and funnel_before[agent]["revised"] == "1"
    usage_before = await _usage(db, tenant)
    assert sum(v for _, m, v in usage_before if m == "operations") == 6

    first, second = await asyncio.gather(prune_operations(runtime.pool, now, RETENTION, limit=1),
                                         prune_operations(runtime.pool, now, RETENTION, limit=1))
    assert first.operations + second.operations == 3  # A's three, each deleted once (by one run or the other)
    assert (await prune_operations(runtime.pool, now, RETENTION)).operations == 0  # nothing left to do

    gone = {"performed_old", "cancelled_old", "expired_old"}
    for case, operation_id in a.items():
        assert await _status(console, tenant, operation_id) == (404 if case in gone else 200), case
    for case, operation_id in b.items():
        assert await _status(console, other_tenant, operation_id) == 200, case
    assert await db.fetchval("SELECT count(*) FROM operation_revisions WHERE operation_id = ANY($1::text[])",
                             [a[c] for c in gone]) == 0
    assert await db.fetchval("SELECT count(*) FROM webhook_messages WHERE id = $1", perform_message) == 0
    assert await db.fetchval("SELECT count(*) FROM webhook_attempts WHERE message_id = $1", perform_message) == 0
    assert await _funnel(console, tenant) == funnel_before  # read from the rollup, not recounted
    assert await _usage(db, tenant) == usage_before

    # Once B's billing caught up, B's old final operations go too; A's are untouched by it.
    await _roll_up(runtime, now)
    await prune_operations(runtime.pool, now, RETENTION)
    for case, operation_id in b.items():
        assert await _status(console, other_tenant, operation_id) == (404 if case in gone else 200), case
    for case, operation_id in a.items():
        assert await _status(console, tenant, operation_id) == (404 if case in gone else 200), case
    assert await prune_operation_chunk(db, now, timedelta(0)) == (0, 0)  # 0s: kept forever


# --- on a database of its own: chunks, budget, order, the message guards, the plan ---------------

NOW = datetime(2027, 6, 1, 12, tzinfo=UTC)


@pytest.fixture
async def url(servers: Servers) -> AsyncIterator[str]:
    async with own_database(servers, "fd_operation_retention") as url:
        async with connected(url) as c:
            await c.execute("INSERT INTO tenants (id, slug, organization_name, created_at) VALUES ('ten_o1', 'o1', 'o1', $1)",
                            NOW - 400 * D)
            await c.execute("INSERT INTO webhook_endpoints (tenant_id, id, url, created_at, updated_at)"
                            " VALUES ('ten_o1', 'whe_1', 'https://hooks.example/perform', $1, $1)", NOW - 400 * D)
            await c.execute("INSERT INTO operation_kinds (tenant_id, name, default_expiry_seconds, max_expiry_seconds,"
                            " perform_endpoint_id, created_at, updated_at)"
                            " VALUES ('ten_o1', 'order.place', 900, 900, 'whe_1', $1, $1)", NOW - 400 * D)
            for table in ("agent_funnel_marks", "billing_usage_marks"):
                await c.execute(f"INSERT INTO {table} (tenant_id, counted_through) VALUES ('ten_o1', $1)",
                                (NOW - 2 * D).date())
        yield url


@pytest.fixture
async def conn(url: str) -> AsyncIterator[asyncpg.Connection]:
    async with connected(url) as c:
        yield c


async def _finished(conn: asyncpg.Connection, count: int, *, at: datetime) -> None:
    """``count`` succeeded operations finished a minute apart from ``at`` on, each with its revision."""
    await conn.execute(
        "INSERT INTO operations (id, tenant_id, kind, client_id, user_id, session_id, state, revision, expires_at,"
        " confirmed_revision, approved_by, confirmed_at, confirmed_via, result, finished_at, created_at, updated_at)"
        " SELECT 'op_' || i, 'ten_o1', 'order.place', 'https://agent.example', 'u', 'ses_1', 'succeeded', 1,"
        " $1::timestamptz, 1, 'user', $1::timestamptz, 'agent', '{\"summary\": \"Ordered\"}',"
        " $1::timestamptz + i * interval '1 minute', $1::timestamptz, $1::timestamptz + i * interval '1 minute'"
        " FROM generate_series(1, $2) i", at, count)
    await conn.execute(
        "INSERT INTO operation_revisions (operation_id, tenant_id, revision, summary, user_approval_required, expires_at,"
        " created_at) SELECT id, tenant_id, 1, 'Order', true, expires_at, created_at FROM operations")


async def test_chunks_respect_their_limit_the_budget_and_the_order(url: str, conn: asyncpg.Connection) -> None:
    await _finished(conn, 30, at=NOW - 200 * D)
    assert await prune_operation_chunk(conn, NOW, RETENTION, limit=7) == (7, 0)
    assert await conn.fetchval("SELECT min(finished_at) FROM operations") == NOW - 200 * D + timedelta(minutes=8)
    pool = await asyncpg.create_pool(url, min_size=1, max_size=1)
    try:
        assert (await prune_operations(pool, NOW, RETENTION, limit=5, budget_s=0.0)).operations == 5  # one chunk
        assert (await prune_operations(pool, NOW, RETENTION, limit=5)).operations == 18  # to a short last chunk
    finally:
        await pool.close()
    assert await conn.fetchval("SELECT count(*) FROM operations") == 0
    assert await conn.fetchval("SELECT count(*) FROM operation_revisions") == 0


async def test_a_pending_or_uncounted_perform_message_keeps_its_operation(conn: asyncpg.Connection) -> None:
    await _finished(conn, 3, at=NOW - 200 * D)
    for i, (state, delivered) in enumerate([("pending", None), ("delivered", NOW - D), ("delivered", NOW - 199 * D)], 1):
        await conn.execute(
            "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, operation_id, state,"
            " created_at, delivered_at) VALUES ('ten_o1', $1, 'whe_1', 'operation.perform', '{}', 'perform', $2, $3,"
            " $4, $5)", f"msg_{i}", f"op_{i}", state, NOW - 200 * D, delivered)
    # op_1's message still waits; op_2's was delivered on a day billing has not counted (yesterday)
    assert await prune_operation_chunk(conn, NOW, RETENTION) == (1, 1)
    assert {r["id"] for r in await conn.fetch("SELECT id FROM operations")} == {"op_1", "op_2"}
    assert {r["id"] for r in await conn.fetch("SELECT id FROM webhook_messages")} == {"msg_1", "msg_2"}
    await conn.execute("UPDATE billing_usage_marks SET counted_through = $1", NOW.date())
    await conn.execute("UPDATE webhook_messages SET state = 'superseded' WHERE id = 'msg_1'")
    assert await prune_operation_chunk(conn, NOW, RETENTION) == (2, 2)


async def test_an_operation_stays_until_the_funnel_and_billing_counted_its_days(conn: asyncpg.Connection) -> None:
    await _finished(conn, 1, at=NOW - 200 * D)
    finished = NOW - 200 * D + timedelta(minutes=1)
    await conn.execute("UPDATE agent_funnel_marks SET counted_through = $1", (finished - D).date())
    assert await prune_operation_chunk(conn, NOW, RETENTION) == (0, 0)
    await conn.execute("UPDATE agent_funnel_marks SET counted_through = $1", finished.date())
    # billing counted the day it finished, not the rest of the month it was proposed in
    month_end = (finished.replace(day=1) + 32 * D).replace(day=1) - D
    await conn.execute("UPDATE billing_usage_marks SET counted_through = $1", (month_end - D).date())
    assert await prune_operation_chunk(conn, NOW, RETENTION) == (0, 0)
    await conn.execute("UPDATE billing_usage_marks SET counted_through = $1", month_end.date())
    assert await prune_operation_chunk(conn, NOW, RETENTION) == (1, 0)


async def test_the_prune_uses_the_partial_index(conn: asyncpg.Connection) -> None:
    """No Seq Scan (with enable_seqscan off, one remains only if no index serves it)."""
    await conn.execute("SET enable_seqscan = off")
    plan = json.loads(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {retention._CHUNK}", NOW - RETENTION, 2000))

    def nodes(n: dict[str, Any]) -> list[dict[str, Any]]:
        return [n, *(m for c in n.get("Plans", []) for m in nodes(c))]

    found = nodes(plan[0]["Plan"])
    assert [n for n in found if n.get("Node Type") == "Seq Scan"] == []
    assert "operations_finished" in {n.get("Index Name") for n in found}  # migration 20261231090000
