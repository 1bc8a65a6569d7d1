"""A message found by its key is looked up by its key, whatever the statistics say.

Right after a burst of messages, before autovacuum re-analyses ``webhook_messages``, the
statistics say almost nothing is pending. A compare-and-set written ``state = 'pending'``
then matched ``webhook_messages_by_state`` (tenant_id, state, created_at) as well as the
unique key, and the planner took the index it believed emptier: each settled batch read
every pending row (bench/delivery_throughput.py: 250-530 ms a batch with 30,000 pending).
Here a fresh database is analysed with finished messages only, then 20,000 pending claimed
messages of a new tenant are written (autovacuum off for the table, so the statistics stay
stale), and every statement that finds a message by its key is EXPLAINed with a custom and
a generic plan: each must reach ``webhook_messages`` through its primary key or unique ID.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from frontdoor_webhooks import claims, delivered_batch, delivery

from tests.support.databases import own_database
from tests.support.servers import Servers

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
LOCKED = NOW + LEASE
NEW, OLD, EP = "ten_burst", "ten_quiet", "ep_burst"
ID = "msg_burst_10000"
KEY_INDEXES = {"webhook_messages_pkey", "webhook_messages_id_key"}


def _statements() -> dict[str, tuple[str, tuple[Any, ...]]]:
    one = ([NEW], [ID])
    return {
        "delivered batch": (delivered_batch._WRITE, (
            *one[:1], ["att_1"], one[1], [EP], [1], ["https://example.com/hook"], [NOW], [12], [200], [""],
            ['{"webhook-id": "x"}'], [LOCKED], [NOW])),
        "settle": (delivery._SETTLE, (
            NEW, ID, 1, LOCKED, "delivered", None, 200, NOW, "att_1", EP, "https://example.com/hook", NOW, 12, None,
            "", '{"webhook-id": "x"}', True)),
        "claim one": (delivery._CLAIM, (ID, NOW, LEASE, NEW)),
        "claim one with secrets": (delivery._CLAIM_WITH_SECRETS, (ID, NOW, LEASE, NEW)),
        "defer": (delivery._DEFER, (NEW, ID, 1, LOCKED, NOW + timedelta(seconds=5))),
        "extend lease": (claims._EXTEND, (NEW, ID, 1, LOCKED, NOW, LEASE)),
        "release claims": (claims._RELEASE, (*one, [1], [LOCKED])),
        "lease claims": (claims._LEASE, (NOW, LEASE, *one)),
        "find due": (claims._FIND.format(order="ASC"), (NOW, 16, 64, [], [], [EP], [8], 64)),
    }


@pytest.fixture(scope="module")
def statements() -> Iterator[dict[str, tuple[str, tuple[Any, ...]]]]:
    yield _statements()


@pytest.fixture
async def stale(servers: Servers) -> AsyncIterator[asyncpg.Connection]:
    async with own_database(servers, "fd_keyplans") as url:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("SET session_replication_role = replica")  # rows without their tenants' rows
            await conn.execute("ALTER TABLE webhook_messages SET (autovacuum_enabled = false)")
            await conn.execute(
                "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, state,"
                " created_at, delivered_at, finished_at)"
                " SELECT $1, 'msg_done_' || g, 'ep_quiet', 'x', '{}', 'event', 'delivered',"
                " $2::timestamptz - interval '1 hour' + g * interval '1 ms', $2, $2 FROM generate_series(1, 3000) g",
                OLD, NOW)
            await conn.execute(
                "INSERT INTO webhook_endpoints (tenant_id, id, url, created_at, updated_at)"
                " SELECT $1, 'ep_quiet_' || g, 'https://example.com/' || g, $2, $2 FROM generate_series(1, 20) g", OLD, NOW)
            await conn.execute("ANALYZE")  # nothing pending, no burst endpoint, as the last analyse saw it
            await conn.execute("INSERT INTO webhook_endpoints (tenant_id, id, url, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
                               NEW, EP, "https://example.com/hook", NOW)
            await conn.execute(
                "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, state,"
                " created_at, next_attempt_at, attempts, locked_until)"
                " SELECT $1, 'msg_burst_' || g, $2, 'x', '{}', 'event', 'pending',"
                " $3::timestamptz + g * interval '1 ms', $3, 1, $4 FROM generate_series(1, 20000) g",
                NEW, EP, NOW, LOCKED)
            await conn.execute("SET session_replication_role = DEFAULT")
            yield conn
        finally:
            await conn.close()


def _bitmap_scans(node: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for child in node.get("Plans", []):
        out.extend([child] if child["Node Type"] == "Bitmap Index Scan" else _bitmap_scans(child))
    return out


async def _literal(conn: asyncpg.Connection, value: Any, type_oid: int) -> str:
    type_name = await conn.fetchval("SELECT format_type($1::oid, NULL)", type_oid)
    text = await conn.fetchval(f"SELECT quote_nullable(($1::{type_name})::text)", value)
    return f"{text}::{type_name}"


async def _message_scans(conn: asyncpg.Connection, sql: str, args: tuple[Any, ...], mode: str) -> list[dict[str, Any]]:
    """The plan's nodes that scan ``webhook_messages`` (EXPLAIN only: nothing runs).

    A custom plan is planned for these values; a generic one, as a prepared statement run
    often gets, for any values (`PREPARE`, then `EXPLAIN EXECUTE` under `force_generic_plan`).
    """
    stmt = await conn.prepare(sql)
    literals = [await _literal(conn, v, t.oid) for v, t in zip(args, stmt.get_parameters(), strict=True)]
    await conn.execute(f"SET plan_cache_mode = {mode}")
    await conn.execute(f"PREPARE keyed AS {sql}")
    try:
        row = await conn.fetchval(f"EXPLAIN (FORMAT JSON) EXECUTE keyed({', '.join(literals)})" if literals
                                  else "EXPLAIN (FORMAT JSON) EXECUTE keyed")
    finally:
        await conn.execute("DEALLOCATE keyed")
    found = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "webhook_messages" and "Scan" in node["Node Type"]:
            if node["Node Type"] == "Bitmap Heap Scan":  # its bitmap's index scans name the indexes
                found.extend(c for c in _bitmap_scans(node))
            else:
                found.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(json.loads(row)[0]["Plan"])
    return found


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
async def test_every_keyed_statement_finds_the_message_by_its_key_under_stale_statistics(
        stale: asyncpg.Connection, statements: dict[str, tuple[str, tuple[Any, ...]]], mode: str) -> None:
    # the trap is there: a plain `state = 'pending'` look-up believes the tenant has nothing pending
    trap = await _message_scans(
        stale, "SELECT 1 FROM webhook_messages WHERE tenant_id = $1 AND id = $2 AND state = 'pending'", (NEW, ID), mode)
    assert [n.get("Index Name") for n in trap] == ["webhook_messages_by_state"]
    wrong: dict[str, list[str]] = {}
    for name, (sql, args) in statements.items():
        nodes = await _message_scans(stale, sql, args, mode)
        if name == "find due":  # the bounded walk of the due index, then the rows by their IDs
            nodes = [n for n in nodes if n.get("Index Name") != "webhook_messages_due"]
        used = [f"{n['Node Type']} {n.get('Index Name')} {n.get('Index Cond')}" for n in nodes]
        if not nodes or any(n.get("Index Name") not in KEY_INDEXES for n in nodes):
            wrong[name] = used
    assert wrong == {}
