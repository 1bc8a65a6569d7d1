"""The outbox over real PostgreSQL: enqueue in the caller's transaction, fan-out, wake-ups,
the due query, redelivery, recovery and pruning."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import (
    NOTIFY_CHANNEL,
    PERFORM,
    create_endpoint,
    deliver,
    disable_endpoint,
    due_messages,
    enqueue_event,
    enqueue_message,
    get_message,
    list_attempts,
    list_messages,
    prune,
    recover,
    redeliver,
)
from webhooks_receiver import Receiver, Reply

URL = "https://hooks.example.com/frontdoor"


async def _endpoint(conn: asyncpg.Connection, actor: Actor, kek: Kek, runtime: Runtime, *types: str,
                    url: str = URL) -> str:
    created = await create_endpoint(conn, actor, url=url, kek=kek, now=runtime.clock(), event_types=list(types),
                                    allow_insecure=True)
    return created.endpoint.id


async def test_enqueue_event_fans_out_to_subscribers_disabled_ones_included(runtime: Runtime, actor: Actor,
                                                                            kek: Kek) -> None:
    async with runtime.pool.acquire() as conn, conn.transaction():
        both = await _endpoint(conn, actor, kek, runtime, "operation.confirmed", "session.signed_in")
        off = await _endpoint(conn, actor, kek, runtime, "operation.confirmed")
        await _endpoint(conn, actor, kek, runtime, "session.signed_in")
        await _endpoint(conn, actor, kek, runtime)  # perform-only
        await disable_endpoint(conn, actor, off, reason="manual", now=runtime.clock())
        ids = await enqueue_event(conn, actor.tenant_id, "operation.confirmed", {"operation_id": "op_1"},
                                  runtime.clock())
        assert len(ids) == 2 and all(i.startswith("msg_") for i in ids)
        messages = [await get_message(conn, actor.tenant_id, i) for i in ids]
        assert {m.endpoint_id for m in messages} == {both, off}
        for m in messages:
            assert m.state == "pending" and m.attempts == 0 and m.purpose == "event"
            assert m.next_attempt_at == m.created_at
            body = msgspec.json.decode(m.body)
            assert body["type"] == "operation.confirmed" and body["data"] == {"operation_id": "op_1"}
        assert messages[0].body == messages[1].body
        assert await enqueue_event(conn, actor.tenant_id, "domain.verified", {}, runtime.clock()) == []
        excluded = await enqueue_event(conn, actor.tenant_id, "operation.confirmed", {}, runtime.clock(),
                                       exclude_endpoint=off)
        assert [(await get_message(conn, actor.tenant_id, i)).endpoint_id for i in excluded] == [both]
        with pytest.raises(Invalid):
            await enqueue_event(conn, actor.tenant_id, PERFORM, {}, runtime.clock())
        with pytest.raises(Invalid):
            await enqueue_message(conn, actor.tenant_id, both, "operation.confirmed", {}, purpose="perform",
                                  now=runtime.clock())
        with pytest.raises(NotFound):
            async with conn.transaction():
                await enqueue_message(conn, actor.tenant_id, "whe_missing", PERFORM, {}, purpose="perform",
                                      now=runtime.clock())


async def test_a_message_exists_only_if_its_transaction_commits_and_wakes_listeners(
        runtime: Runtime, actor: Actor, kek: Kek) -> None:
    heard: asyncio.Queue[str] = asyncio.Queue()
    async with runtime.pool.acquire() as listener, runtime.pool.acquire() as conn:
        def on_notify(*args: Any) -> None:
            heard.put_nowait(args[3])

        await listener.add_listener(NOTIFY_CHANNEL, on_notify)
        try:
            endpoint_id = await _endpoint(conn, actor, kek, runtime, "agent.blocked")
            with pytest.raises(RuntimeError):
                async with conn.transaction():
                    await enqueue_event(conn, actor.tenant_id, "agent.blocked", {}, runtime.clock())
                    raise RuntimeError("the change failed")
            assert await list_messages(conn, actor.tenant_id, endpoint_id=endpoint_id) == []
            async with conn.transaction():
                [message_id] = await enqueue_event(conn, actor.tenant_id, "agent.blocked", {"client_id": "c"},
                                                   runtime.clock())
            assert await asyncio.wait_for(heard.get(), timeout=5) == message_id
            assert heard.empty()  # the rolled-back one never notified
        finally:
            await listener.remove_listener(NOTIFY_CHANNEL, on_notify)


async def test_due_messages_skip_locked_rows_disabled_endpoints_and_future_ones(
        runtime: Runtime, actor: Actor, kek: Kek) -> None:
    async with runtime.pool.acquire() as conn:
        on = await _endpoint(conn, actor, kek, runtime, "domain.verified")
        off = await _endpoint(conn, actor, kek, runtime, "domain.verified")
        await disable_endpoint(conn, actor, off, reason="manual", now=runtime.clock())
        early = runtime.clock() - timedelta(days=400)  # due before anything other tests leave behind
        first = await enqueue_message(conn, actor.tenant_id, on, "domain.verified", {"n": 1}, purpose="event",
                                      now=early)
        second = await enqueue_message(conn, actor.tenant_id, on, "domain.verified", {"n": 2}, purpose="event",
                                       now=early + timedelta(seconds=1))
        waiting = await enqueue_message(conn, actor.tenant_id, off, "domain.verified", {}, purpose="event", now=early)
        future = await enqueue_message(conn, actor.tenant_id, on, "domain.verified", {}, purpose="event",
                                       now=runtime.clock() + timedelta(hours=1))
    async with runtime.pool.acquire() as a, runtime.pool.acquire() as b, a.transaction(), b.transaction():
        seen_a = await due_messages(a, runtime.clock(), limit=1)
        seen_b = await due_messages(b, runtime.clock(), limit=1000)
    assert seen_a == [first]
    assert second in seen_b and first not in seen_b
    assert waiting not in seen_b and future not in seen_b


async def test_redeliver_and_recover(runtime: Runtime, actor: Actor, other_tenant_id: str, kek: Kek,
                                     deps: dict[str, Any]) -> None:
    async with Receiver() as receiver:
        receiver.script("/r", Reply(status=500, headers=(("webhook-delivery", "abort"),)), Reply(status=200))
        async with runtime.pool.acquire() as conn:
            endpoint_id = await _endpoint(conn, actor, kek, runtime, "domain.suspended", url=receiver.url("/r"))
            ids = await enqueue_event(conn, actor.tenant_id, "domain.suspended", {}, runtime.clock())
            ids += await enqueue_event(conn, actor.tenant_id, "domain.suspended", {}, runtime.clock())
        aborted, delivered = ids
        assert (await deliver(runtime.pool, aborted, **deps)).state == "aborted"  # type: ignore[union-attr]
        assert (await deliver(runtime.pool, delivered, **deps)).state == "delivered"  # type: ignore[union-attr]
        intruder = Actor(tenant_id=other_tenant_id, type="api_key")
        async with runtime.pool.acquire() as conn:
            with pytest.raises(NotFound):
                await redeliver(conn, intruder, delivered, now=runtime.clock())
            with pytest.raises(NotFound):
                await recover(conn, intruder, endpoint_id, since=runtime.clock() - timedelta(hours=1),
                              now=runtime.clock())
            assert await recover(conn, actor, endpoint_id, since=runtime.clock() + timedelta(hours=1),
                                 now=runtime.clock()) == 0
            assert await recover(conn, actor, endpoint_id, since=runtime.clock() - timedelta(hours=1),
                                 now=runtime.clock()) == 1
            assert (await get_message(conn, actor.tenant_id, aborted)).state == "pending"
            again = await redeliver(conn, actor, delivered, now=runtime.clock())
            assert again.state == "pending" and again.attempts == 0
        for message_id in (aborted, delivered):
            report = await deliver(runtime.pool, message_id, **deps)
            assert report is not None and report.state == "delivered"
        assert [r.headers["webhook-id"] for r in receiver.at("/r")] == [aborted, delivered, aborted, delivered]
        async with runtime.pool.acquire() as conn:
            assert len(await list_attempts(conn, actor.tenant_id, aborted)) == 2
            assert await list_attempts(conn, other_tenant_id, aborted) == []


async def test_prune_removes_old_finished_messages_and_their_attempts_only(
        runtime: Runtime, actor: Actor, kek: Kek, deps: dict[str, Any]) -> None:
    async with Receiver() as receiver:
        receiver.script("/p", Reply(status=200))
        async with runtime.pool.acquire() as conn:
            endpoint_id = await _endpoint(conn, actor, kek, runtime, "domain.verified", url=receiver.url("/p"))
            [old_done] = await enqueue_event(conn, actor.tenant_id, "domain.verified", {}, runtime.clock())
            [old_pending] = await enqueue_event(conn, actor.tenant_id, "domain.verified", {}, runtime.clock())
        await deliver(runtime.pool, old_done, **deps)
        runtime.clock.advance(days=31)  # type: ignore[attr-defined]
        async with runtime.pool.acquire() as conn:
            await disable_endpoint(conn, actor, endpoint_id, reason="manual", now=runtime.clock())
            [recent] = await enqueue_event(conn, actor.tenant_id, "domain.verified", {}, runtime.clock())
            await conn.execute("UPDATE webhook_messages SET state = 'delivered' WHERE tenant_id = $1 AND id = $2",
                               actor.tenant_id, recent)
            deleted = await prune(conn, runtime.clock(), timedelta(days=30))
            assert deleted >= 1
            remaining = {m.id for m in await list_messages(conn, actor.tenant_id, endpoint_id=endpoint_id)}
            assert remaining == {old_pending, recent}
            assert await list_attempts(conn, actor.tenant_id, old_done) == []
            assert await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE tenant_id = $1 AND message_id = $2",
                                       actor.tenant_id, old_done) == 0
