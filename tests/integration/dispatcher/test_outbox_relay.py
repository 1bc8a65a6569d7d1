"""The outbox relay over real PostgreSQL: woken by NOTIFY, SKIP LOCKED batches, nothing lost."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.relay import Relay
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.messages import enqueue_message
from frontdoor_webhooks.sender import SafeSender
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.eventually import eventually
from tests.support.mock_web import MockWeb


async def test_relay_wakes_on_notify_and_every_message_arrives_once(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    hook = f"https://{unique('relay-')}.example/hook"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    endpoint, secret = r.json()["endpoint"]["id"], r.json()["secret"]
    seen: list[str] = []

    async def receive(request: httpx.Request) -> httpx.Response:
        Webhook(secret).verify(request.content, dict(request.headers))
        seen.append(request.headers["webhook-id"])
        return httpx.Response(204)

    web.handle(hook, receive)
    sender = SafeSender(SafeFetcher(transport=web))
    policy = DeliveryPolicy.from_settings(runtime.settings)
    kek = Kek.from_env_value(kek_value)
    batches: list[list[str]] = []
    tasks: set[asyncio.Task[Any]] = set()

    async def send(batch: list[str]) -> None:  # a coroutine: awaited on the relay's loop
        batches.append(batch)
        for message_id in batch:
            task = asyncio.get_running_loop().create_task(
                deliver(runtime.pool, message_id, sender=sender, kek=kek, clock=runtime.clock, policy=policy))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    relay = Relay(runtime.settings.database_url, send, batch=10, idle_wake=30.0)
    running = asyncio.create_task(relay.run())
    try:
        await asyncio.sleep(0.3)  # listening
        ids = []
        async with runtime.pool.acquire() as conn, conn.transaction():
            for i in range(25):
                ids.append(await enqueue_message(conn, tenant.id, endpoint, "operation.succeeded", {"n": i},
                                                 purpose="event", now=runtime.clock()))
        # idle_wake is 30 s: only the NOTIFY can wake the relay this fast.
        async def all_arrived() -> None:
            assert sorted(seen) == sorted(ids)

        await eventually(all_arrived, timeout=5.0)
    finally:
        relay.stop()
        await asyncio.wait_for(running, 5)
        # Every attempt this test started ends within it: one still settling when the session's
        # pool closes (the test last on its xdist worker) would meet "pool is closing".
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
    assert len(seen) == len(set(seen)) == 25
    assert all(len(b) <= 10 for b in batches)

    async def all_recorded() -> None:  # the receiver answered; the attempt is written just after
        async with runtime.pool.acquire() as conn:
            states = await conn.fetch("SELECT state FROM webhook_messages WHERE id = ANY($1)", ids)
        assert {s["state"] for s in states} == {"delivered"}

    await eventually(all_recorded, timeout=5.0)
