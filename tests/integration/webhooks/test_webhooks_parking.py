"""A disabled endpoint's messages are parked out of the due index; enabling the endpoint
unparks them, makes them due at once and wakes the deliverer, in its transaction."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import asyncpg
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint, deliver, disable_endpoint, enable_endpoint
from frontdoor_webhooks.delivery import due_messages
from frontdoor_webhooks.messages import NOTIFY_CHANNEL, enqueue_message
from webhooks_receiver import Receiver, Reply


async def _endpoint(runtime: Runtime, actor: Actor, kek: Kek, url: str = "http://127.0.0.1:9/p") -> str:
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=url, kek=kek, now=runtime.clock(), allow_insecure=True)
    return created.endpoint.id


async def _parked(conn: asyncpg.Connection, endpoint_id: str) -> tuple[int, int]:
    row = await conn.fetchrow("SELECT count(*) FILTER (WHERE parked) AS parked, count(*) FILTER (WHERE NOT parked) AS"
                              " unparked FROM webhook_messages WHERE endpoint_id = $1 AND state = 'pending'",
                              endpoint_id)
    return row["parked"], row["unparked"]


async def test_the_due_index_leaves_a_disabled_endpoints_backlog_out(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    dead = await _endpoint(runtime, actor, kek)
    live = await _endpoint(runtime, actor, kek)
    early = runtime.clock() - timedelta(days=300)
    async with runtime.pool.acquire() as conn:
        await conn.execute(  # 5,000 waiting messages, written while the endpoint was still enabled
            "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, next_attempt_at,"
            " created_at) SELECT $1, 'msg_park_' || $2 || '_' || n, $2, 'domain.verified', '{}', 'event', $3, $3"
            " FROM generate_series(1, 5000) AS n", actor.tenant_id, dead, early)
        await disable_endpoint(conn, actor, dead, reason="manual", now=runtime.clock())
        assert await _parked(conn, dead) == (5000, 0)
        later = await enqueue_message(conn, actor.tenant_id, dead, "domain.verified", {}, purpose="event", now=early)
        assert await conn.fetchval("SELECT parked FROM webhook_messages WHERE id = $1", later)  # written parked
        due = await enqueue_message(conn, actor.tenant_id, live, "domain.verified", {}, purpose="event",
                                    now=early + timedelta(seconds=1))
        index = await conn.fetchval("SELECT pg_get_indexdef('webhook_messages_due'::regclass)")
        assert "NOT parked" in index and "'pending'" in index
        # What the due index holds of the dead endpoint: nothing.
        assert await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE endpoint_id = $1"
                                   " AND state = 'pending' AND NOT parked", dead) == 0
        # Parking is not a HOT update (`parked` is in the due index's predicate): until a vacuum the
        # due index still points at the 5,000 versions it replaced, and a bitmap scan of it returns
        # them (the deliverer's claiming connection plans without bitmap scans).
        await conn.execute("VACUUM webhook_messages")
        async with conn.transaction():
            plan = await conn.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) SELECT m.id FROM webhook_messages AS m WHERE m.state = 'pending'"
                " AND NOT m.parked AND m.next_attempt_at <= $1 AND m.endpoint_id = ANY($2::text[])",
                runtime.clock(), [dead, live])
            found = await due_messages(conn, early + timedelta(seconds=2), limit=100)
    assert due in found and not any(m.startswith("msg_park_") for m in found) and later not in found
    rows = _scanned(json.loads(plan) if isinstance(plan, str) else plan)
    assert rows < 1000, rows  # the 5,001 parked rows are never read


def _scanned(plan: Any) -> int:
    """Rows the scans of a JSON plan produced (before any filter, i.e. rows examined)."""
    total = 0
    stack = [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        if "Scan" in node["Node Type"]:
            total += int(node.get("Actual Rows", 0)) + int(node.get("Rows Removed by Filter", 0))
        stack.extend(node.get("Plans", []))
    return total


async def test_enabling_unparks_makes_due_and_notifies_in_its_transaction(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/gone", Reply(status=410))
    endpoint_id = await _endpoint(runtime, actor, kek, receiver.url("/gone"))
    async with runtime.pool.acquire() as conn:
        first = await enqueue_message(conn, actor.tenant_id, endpoint_id, "domain.verified", {}, purpose="event",
                                      now=runtime.clock())
        waiting = await enqueue_message(conn, actor.tenant_id, endpoint_id, "domain.verified", {}, purpose="event",
                                        now=runtime.clock())
        await conn.execute("UPDATE webhook_messages SET next_attempt_at = $2 WHERE id = $1", waiting,
                           runtime.clock() + timedelta(hours=5))  # a retry hours away
    report = await deliver(runtime.pool, first, **deps)  # 410: the delivery engine disables the endpoint
    assert report is not None and report.endpoint_disabled
    listener = await asyncpg.connect(runtime.settings.database_url)
    heard: asyncio.Queue[str] = asyncio.Queue()
    await listener.add_listener(NOTIFY_CHANNEL, lambda *a: heard.put_nowait(a[3]))
    try:
        async with runtime.pool.acquire() as conn:
            assert await _parked(conn, endpoint_id) == (2, 0)  # parked by the automatic disabling too
            now = runtime.clock()
            try:
                async with conn.transaction():
                    await enable_endpoint(conn, actor, endpoint_id, now=now)
                    raise RuntimeError("roll back")
            except RuntimeError:
                pass
            assert await _parked(conn, endpoint_id) == (2, 0)
            async with conn.transaction():
                await enable_endpoint(conn, actor, endpoint_id, now=now)
            assert await _parked(conn, endpoint_id) == (0, 2)
            due_at = await conn.fetchval("SELECT next_attempt_at FROM webhook_messages WHERE id = $1", waiting)
            assert due_at <= now
        assert await asyncio.wait_for(heard.get(), timeout=5) == endpoint_id
        assert heard.empty()  # the rolled-back enable told nobody
    finally:
        await listener.close()


async def test_a_message_written_while_the_endpoint_is_enabled_is_not_left_parked(
        runtime: Runtime, actor: Actor, kek: Kek) -> None:
    endpoint_id = await _endpoint(runtime, actor, kek)
    async with runtime.pool.acquire() as writer, runtime.pool.acquire() as admin:
        await disable_endpoint(admin, actor, endpoint_id, reason="manual", now=runtime.clock())
        tx = writer.transaction()
        await tx.start()
        message_id = await enqueue_message(writer, actor.tenant_id, endpoint_id, "domain.verified", {},
                                           purpose="event", now=runtime.clock())  # parked, not committed
        enabling = asyncio.create_task(enable_endpoint(admin, actor, endpoint_id, now=runtime.clock()))
        await asyncio.sleep(0.3)
        assert not enabling.done()  # waits for the writer, or it would miss its message
        await tx.commit()
        await asyncio.wait_for(enabling, 5)
        assert await admin.fetchval("SELECT parked FROM webhook_messages WHERE id = $1", message_id) is False
