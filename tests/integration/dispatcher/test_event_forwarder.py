"""The event forwarder over real PostgreSQL: woken by NOTIFY frontdoor_events, each outbox row
becomes one message per subscribed endpoint exactly once, even with two forwarders."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.event_forwarder import EventForwarder
from frontdoor_sessions import record_event
from frontdoor_tenancy import outbox_events
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.eventually import eventually


async def test_two_forwarders_wake_on_notify_and_forward_each_row_once(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, db: Any) -> None:
    types = ["session.signed_out", "domain.suspended"]
    endpoints = []
    for _ in range(2):
        r = await console.post("/api/v1/webhook-endpoints",
                               json={"url": f"https://{unique('fwd-')}.example/h", "event_types": types},
                               headers=tenant.auth)
        assert r.status_code == 201, r.text
        endpoints.append(r.json()["endpoint"]["id"])
    # A long idle wake: only the notification can make this fast.
    forwarders = [EventForwarder(runtime.settings.database_url, idle_wake=30.0, limit=7) for _ in range(2)]
    running = [asyncio.create_task(f.run()) for f in forwarders]
    try:
        await asyncio.sleep(0.3)  # listening
        async with runtime.pool.acquire() as conn, conn.transaction():
            for i in range(20):
                await record_event(conn, tenant.id, "session.signed_out", {
                    "session_id": f"ses_{i}", "client_id": "https://agent.example/a.json", "user_id": "u",
                    "sign_in_id": "sgn_1", "reason": "disconnected"}, now=runtime.clock())
            await outbox_events.record_event(conn, tenant.id, "domain.suspended", {
                "domain": "shop.example.com", "missing_since": "2026-12-01T00:00:00Z"}, now=runtime.clock())

        async def all_forwarded() -> None:
            count = await db.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1", tenant.id)
            assert count == 21 * 2, count

        await eventually(all_forwarded, timeout=5.0)
    finally:
        for f in forwarders:
            f.stop()
        await asyncio.gather(*running)
    assert sum(f.forwarded for f in forwarders) >= 21
    rows = await db.fetch("SELECT endpoint_id, body FROM webhook_messages WHERE tenant_id = $1", tenant.id)
    per_object: dict[tuple[str, str], int] = {}
    for row in rows:
        data = msgspec.json.decode(row["body"])["data"]
        key = (row["endpoint_id"], data.get("session_id") or data["domain"])
        per_object[key] = per_object.get(key, 0) + 1
        assert data["sequence"] >= 1
    assert set(per_object.values()) == {1} and len(per_object) == 42  # none lost, none twice
    assert await db.fetchval("SELECT count(*) FROM session_events WHERE tenant_id = $1 AND forwarded_at IS NULL",
                             tenant.id) == 0
