"""Every hot query has an index to use (issue #15 §3): no Seq Scan in its plan.

A fresh database on the worker's server is migrated and seeded with
``frontdoor_devstack.scale_seed`` (60 tenants, a few thousand Sessions, operations and
attempts), then the repository functions behind the Session grant, introspection, the
confirm and the dashboard's heaviest pages run once through
``frontdoor_devstack.query_plans.ExplainingConnection``, which EXPLAINs each statement they
send. On tables this small the planner rightly prefers a sequential scan, so the check runs
with ``enable_seqscan = off``: a Seq Scan that remains means no index can serve the query
(the planner falls back to it only then). That is deterministic; which index wins on the
real data is what ``bench/scale.py --explain`` prints.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
from frontdoor_devstack.query_plans import exercise_hot_paths, sequential_scans
from frontdoor_devstack.scale_seed import ScalePlan

from tests.support.databases import own_database, seed_scale
from tests.support.servers import Servers

PLAN = ScalePlan(tenants=60, sessions=3_000, operations=3_000, attempts=6_000, agents_per_tenant=3,
                 audit_per_tenant=5, prefix="q")


@pytest.fixture
async def seeded_url(servers: Servers, kek_value: str) -> AsyncIterator[str]:
    async with own_database(servers, "fd_plans") as url:
        await seed_scale(url, PLAN, kek_value)
        yield url


async def test_hot_paths_use_an_index_for_every_table(seeded_url: str) -> None:
    conn = await asyncpg.connect(seeded_url)
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        await conn.execute("SET enable_seqscan = off")
        tx = conn.transaction()
        await tx.start()
        try:
            plans = await exercise_hot_paths(conn)
        finally:
            await tx.rollback()
    finally:
        await conn.close()
    paths = {p.path for p in plans}
    assert paths == {"session grant", "introspection", "confirm", "dashboard overview", "dashboard lists"}
    assert len(plans) >= 20  # every function sent its statements through the explaining connection
    scanned = {n.get("Relation Name") for p in plans for n in p.nodes()}
    assert {"pap_sessions", "operations", "webhook_messages", "audit_log"} <= scanned
    assert any(name and name.startswith("webhook_attempts_p") for name in scanned)  # partitions are read
    assert sequential_scans(plans) == []


async def test_the_check_sees_a_sequential_scan(seeded_url: str) -> None:
    """The detector itself: a query no index serves is found (a Seq Scan, or a whole-index walk)."""
    conn = await asyncpg.connect(seeded_url)
    try:
        await conn.execute("SET enable_seqscan = off")
        from frontdoor_devstack.query_plans import ExplainingConnection

        c = ExplainingConnection(conn, path="unindexed")
        await c.fetchval("SELECT count(*) FROM pap_sessions WHERE end_reason = $1", "agent_blocked")
    finally:
        await conn.close()
    # with enable_seqscan off the planner may walk a whole index instead; both are found
    [(path, name, _)] = sequential_scans(c.plans)
    assert path == "unindexed" and name.startswith("pap_sessions")
