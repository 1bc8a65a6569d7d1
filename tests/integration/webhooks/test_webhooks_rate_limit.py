"""An endpoint's rate_limit_per_second holds across every process sending to it (counted in PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import deliver
from frontdoor_webhooks.endpoints import create_endpoint
from frontdoor_webhooks.messages import enqueue_message, get_message
from frontdoor_webhooks.rate_windows import PgThrottle

from tests.integration.webhooks.webhooks_receiver import Receiver, Reply


async def test_over_the_rate_a_message_is_deferred_without_using_an_attempt(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/limited", *[Reply(status=204, body=b"")] * 10)
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=receiver.url("/limited"), kek=kek, now=runtime.clock(),
                                        allow_insecure=True, rate_limit_per_second=2)
        ids = [await enqueue_message(conn, actor.tenant_id, created.endpoint.id, "operation.confirmed", {"n": i},
                                     purpose="event", now=runtime.clock()) for i in range(5)]
    # Two throttles on the pool stand for two deliverer replicas (and the ledger's fast path):
    # one window per endpoint, in the database, whichever process sends.
    throttles = [PgThrottle(runtime.pool), PgThrottle(runtime.pool)]
    reports = await asyncio.gather(*(deliver(runtime.pool, m, throttle=throttles[i % 2], **deps)
                                     for i, m in enumerate(ids)))
    sent = [r for r in reports if r is not None]
    # One-second windows: at most 2 in this window (a window boundary may let 2 more through).
    assert 2 <= len(sent) <= 4
    assert len(receiver.at("/limited")) == len(sent)
    async with runtime.pool.acquire() as conn:
        deferred = [await get_message(conn, actor.tenant_id, m) for m, r in zip(ids, reports, strict=True)
                    if r is None]
    assert deferred and all(m.state == "pending" and m.attempts == 0 and m.next_attempt_at > runtime.clock()
                            for m in deferred)


async def test_without_a_rate_every_message_goes(runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver,
                                                 deps: dict[str, Any]) -> None:
    receiver.script("/open", *[Reply(status=204, body=b"")] * 6)
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=receiver.url("/open"), kek=kek, now=runtime.clock(),
                                        allow_insecure=True)
        ids = [await enqueue_message(conn, actor.tenant_id, created.endpoint.id, "operation.confirmed", {"n": i},
                                     purpose="event", now=runtime.clock()) for i in range(6)]
    reports = await asyncio.gather(*(deliver(runtime.pool, m, throttle=PgThrottle(runtime.pool), **deps)
                                     for m in ids))
    assert all(r is not None and r.state == "delivered" for r in reports)
