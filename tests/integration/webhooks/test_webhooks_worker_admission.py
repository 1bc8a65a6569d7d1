"""A worker process caps attempts per endpoint and in all, and hands the rest back instead of
waiting: thousands of messages to a dead endpoint do not delay another tenant's message."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.admission import PER_ENDPOINT, PER_ENDPOINT_WAITING, InFlight, start_attempts
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint
from frontdoor_webhooks.messages import enqueue_message


async def _endpoint(runtime: Runtime, actor: Actor, kek: Kek, path: str) -> str:
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=f"http://127.0.0.1:9{path}", kek=kek, now=runtime.clock(),
                                        allow_insecure=True)
    return created.endpoint.id


async def test_a_dead_endpoints_backlog_does_not_delay_another_tenant(
        runtime: Runtime, actor: Actor, other_tenant_id: str, kek: Kek) -> None:
    dead = await _endpoint(runtime, actor, kek, "/dead")
    other = await _endpoint(runtime, Actor(tenant_id=other_tenant_id, type="api_key"), kek, "/alive")
    now = runtime.clock()
    async with runtime.pool.acquire() as conn:
        dead_ids = [r["id"] for r in await conn.fetch(
            "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, next_attempt_at,"
            " created_at) SELECT $1, 'msg_dead_' || $2 || '_' || n, $2, 'domain.verified', '{}', 'event', $3, $3"
            " FROM generate_series(1, 3000) AS n RETURNING id", actor.tenant_id, dead, now)]
        other_id = await enqueue_message(conn, other_tenant_id, other, "domain.verified", {}, purpose="event", now=now)
    hang = asyncio.Event()
    started: dict[str, float] = {}

    async def slow_attempt(message_id: str, purpose: str) -> None:  # a dead endpoint: waits for its timeout
        started[message_id] = time.monotonic()
        if message_id != other_id:
            await hang.wait()

    in_flight = InFlight(total=500, per_endpoint=PER_ENDPOINT)
    full = InFlight(total=PER_ENDPOINT, per_endpoint=PER_ENDPOINT, per_endpoint_waiting=0)
    t0 = time.monotonic()
    try:
        batches = [dead_ids[i:i + 500] for i in range(0, len(dead_ids), 500)] + [[other_id]]
        results = [await asyncio.wait_for(start_attempts(runtime.pool, batch, in_flight, slow_attempt,
                                                         clock=runtime.clock, hand_back_within=15.0), 5)
                   for batch in batches]
        await asyncio.sleep(0)
        assert other_id in started and started[other_id] - t0 < 2.0  # promptly
        taken = PER_ENDPOINT + PER_ENDPOINT_WAITING
        assert sum(len(r.started) for r in results[:-1]) == taken == in_flight.by_endpoint[dead]
        assert in_flight.running_by_endpoint[dead] == PER_ENDPOINT  # the others wait for these
        assert sum(1 for m in dead_ids if m in started) == PER_ENDPOINT
        handed_back = [m for r in results for m in r.handed_back]
        assert len(handed_back) == 3000 - taken
        async with runtime.pool.acquire() as conn:
            rows = await conn.fetch("SELECT attempts, next_attempt_at FROM webhook_messages WHERE id = ANY($1)",
                                    handed_back)
        # not started, no attempt used; due again shortly, so the relay offers them again
        bad = [r for r in rows if not (r["attempts"] == 0 and now < r["next_attempt_at"] <= now + timedelta(seconds=18))]
        assert not bad, (now, bad[:3])

        # A full process hands back at once too, rather than waiting for room.
        await start_attempts(runtime.pool, dead_ids[:PER_ENDPOINT], full, slow_attempt, clock=runtime.clock,
                             hand_back_within=15.0)
        async with runtime.pool.acquire() as conn:
            await conn.execute("UPDATE webhook_messages SET next_attempt_at = $2 WHERE id = $1", other_id, now)
        admitted = await asyncio.wait_for(start_attempts(runtime.pool, [other_id], full, slow_attempt,
                                                         clock=runtime.clock, hand_back_within=15.0), 2)
        assert admitted.started == [] and admitted.handed_back == [other_id]
    finally:
        hang.set()
        await asyncio.gather(*in_flight.tasks, *full.tasks, return_exceptions=True)
    assert in_flight.taken == 0 and not in_flight.by_endpoint and not in_flight.running_by_endpoint
