"""The operation retention prune (ADR 0007, addendum) on a large table: its plan and its rate.

    python bench/operation_prune.py               # 1,000 tenants x 500 operations, each with its perform message
    python bench/operation_prune.py --tenants 200 --per-tenant 100   # a smoke run

An embedded PostgreSQL of its own, every migration, then ``INSERT ... SELECT generate_series``:
operations spread over 800 days (one in ten still in progress, the rest succeeded), one
revision and one delivered perform message each, every tenant's funnel and billing marks at
two days ago, ANALYZE. Prints how many are past a 400-day retention, the plan of one chunk
(``EXPLAIN`` of the prune's own statement: every scan should be an index scan), and the rows
per second of `prune_operations` deleting them all (operations, with their revisions and
messages).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from frontdoor_core.migrations import MIGRATED_PACKAGES, apply_migrations, discover
from frontdoor_devstack.postgres import EmbeddedPostgres
from frontdoor_operations import retention
from frontdoor_operations.retention import prune_operations

NOW = datetime(2027, 6, 1, tzinfo=UTC)
RETENTION = timedelta(days=400)

_OPERATIONS = """
INSERT INTO operations (id, tenant_id, kind, client_id, user_id, session_id, state, revision, expires_at,
  confirmed_revision, approved_by, confirmed_at, confirmed_via, result, finished_at, created_at, updated_at)
SELECT 'op_' || t || '_' || i, 'ten_' || t, 'k', 'https://agent.example', 'u', 'ses',
  CASE WHEN i % 10 = 0 THEN 'in_progress' ELSE 'succeeded' END, 1, at, 1, 'user', at, 'agent',
  CASE WHEN i % 10 = 0 THEN NULL ELSE '{"summary": "Ordered"}'::jsonb END,
  CASE WHEN i % 10 = 0 THEN NULL ELSE at + interval '1 minute' END, at, at
FROM generate_series(1, $2) t, generate_series(1, $3) i,
  LATERAL (SELECT $1::timestamptz - (i * 800.0 / $3) * interval '1 day' AS at) x
"""


async def run(tenants: int, per_tenant: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="fd-bench-prune-"))
    os.chmod(root, 0o711)  # the embedded server may run as 'nobody'
    pg = EmbeddedPostgres(root / "pg", durable=False)
    pg.start()
    try:
        conn = await asyncpg.connect(pg.url)
        await apply_migrations(conn, discover(MIGRATED_PACKAGES))
        await conn.execute("INSERT INTO tenants (id, slug, organization_name, created_at)"
                           " SELECT 'ten_' || i, 't' || i, 't', $1 FROM generate_series(1, $2) i",
                           NOW - timedelta(days=900), tenants)
        await conn.execute("INSERT INTO webhook_endpoints (tenant_id, id, url, created_at, updated_at)"
                           " SELECT id, 'whe_' || id, 'https://hooks.example/perform', $1, $1 FROM tenants", NOW)
        await conn.execute("INSERT INTO operation_kinds (tenant_id, name, default_expiry_seconds, max_expiry_seconds,"
                           " perform_endpoint_id, created_at, updated_at)"
                           " SELECT id, 'k', 900, 900, 'whe_' || id, $1, $1 FROM tenants", NOW)
        for table in ("agent_funnel_marks", "billing_usage_marks"):
            await conn.execute(f"INSERT INTO {table} SELECT id, $1::date FROM tenants",
                               (NOW - timedelta(days=2)).date())
        started = time.monotonic()
        await conn.execute(_OPERATIONS, NOW, tenants, per_tenant)
        await conn.execute("INSERT INTO operation_revisions (operation_id, tenant_id, revision, summary,"
                           " user_approval_required, expires_at, created_at)"
                           " SELECT id, tenant_id, 1, 'Order', true, expires_at, created_at FROM operations")
        await conn.execute("INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose,"
                           " operation_id, state, created_at, delivered_at, finished_at)"
                           " SELECT tenant_id, 'msg_' || id, 'whe_' || tenant_id, 'operation.perform', '{}', 'perform',"
                           " id, 'delivered', created_at, confirmed_at, confirmed_at FROM operations")
        await conn.execute("ANALYZE")
        total = await conn.fetchval("SELECT count(*) FROM operations")
        past = await conn.fetchval("SELECT count(*) FROM operations WHERE state = 'succeeded' AND finished_at < $1",
                                   NOW - RETENTION)
        print(f"seeded {total:,} operations (+ a revision and a perform message each) in"
              f" {time.monotonic() - started:.0f} s; {past:,} final ones past {RETENTION.days} days")
        plan = await conn.fetch(f"EXPLAIN {retention._CHUNK}", NOW - RETENTION, retention.CHUNK)
        print("\n".join(r[0] for r in plan))
        pool = await asyncpg.create_pool(pg.url, min_size=1, max_size=2)
        try:
            started = time.monotonic()
            pruned = await prune_operations(pool, NOW, RETENTION, budget_s=3600.0)
            took = time.monotonic() - started
        finally:
            await pool.close()
        print(f"pruned {pruned.operations:,} operations and {pruned.messages:,} perform messages in {took:.1f} s:"
              f" {pruned.operations / took:,.0f} operations/s")
        left = await conn.fetchval("SELECT count(*) FROM operations")
        print(f"left {left:,} (in progress, or within retention)")
        await conn.close()
    finally:
        pg.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--tenants", type=int, default=1000)
    p.add_argument("--per-tenant", type=int, default=500)
    args = p.parse_args()
    asyncio.run(run(args.tenants, args.per_tenant))


if __name__ == "__main__":
    main()
