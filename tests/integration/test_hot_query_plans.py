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
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from frontdoor_core.migrations import apply_migrations, discover
from frontdoor_devstack.query_plans import exercise_hot_paths, sequential_scans
from frontdoor_devstack.scale_seed import ScalePlan, seed, sign_up_template

from tests.conftest import MIGRATED_PACKAGES
from tests.support.servers import Servers

PLAN = ScalePlan(tenants=60, sessions=3_000, operations=3_000, attempts=6_000, agents_per_tenant=3,
                 audit_per_tenant=5, prefix="q")


@pytest.fixture
async def seeded_url(servers: Servers, kek_value: str) -> AsyncIterator[str]:
    name = f"fd_plans_{secrets.token_hex(6)}"
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
        finally:
            await conn.close()
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


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
