"""The relay commits before it publishes, and publishes in a thread: a stalled broker holds no
row lock and does not stop the relay's event loop."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import asyncpg
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.relay import Relay
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint
from frontdoor_webhooks.messages import enqueue_message


async def test_a_stalled_publish_holds_no_lock_and_does_not_block_the_loop(
        runtime: Runtime, actor: Actor, kek: Kek) -> None:
    async with runtime.pool.acquire() as conn:
        endpoint_id = (await create_endpoint(conn, actor, url="http://127.0.0.1:9/relay", kek=kek,
                                             now=runtime.clock(), allow_insecure=True)).endpoint.id
        message_id = await enqueue_message(conn, actor.tenant_id, endpoint_id, "domain.verified", {},
                                           purpose="event", now=runtime.clock() - timedelta(days=500))
    database_url = runtime.settings.database_url
    locked_during_publish: list[bool] = []

    async def row_is_locked(ids: list[str]) -> bool:
        conn = await asyncpg.connect(database_url)
        try:
            async with conn.transaction():
                await conn.execute("SELECT id FROM webhook_messages WHERE id = ANY($1) FOR UPDATE NOWAIT", ids)
            return False
        except asyncpg.LockNotAvailableError:
            return True
        finally:
            await conn.close()

    def stalled_send(batch: list[str]) -> None:  # a synchronous apply_async to a broker that hangs
        if message_id in batch:
            locked_during_publish.append(asyncio.run(row_is_locked(batch)))
        time.sleep(1.0)

    relay = Relay(database_url, stalled_send, batch=50, idle_wake=0.2)
    running = asyncio.create_task(relay.run())
    try:
        deadline = time.monotonic() + 10
        while not locked_during_publish and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        t0 = time.monotonic()
        for _ in range(10):  # while the publish is stalled (1 s), this loop goes on
            await asyncio.sleep(0.01)
        assert time.monotonic() - t0 < 0.5
    finally:
        relay.stop()
        await asyncio.wait_for(running, 10)
    assert locked_during_publish and locked_during_publish[0] is False
