"""`DeliveredBatch` over real PostgreSQL: many clean ``2xx`` attempts written by one statement:
an attempt row for each, each message delivered only while its claim is still this one
(compare-and-set), and only the endpoints whose messages it recorded marked healthy."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint, enqueue_message, get_message, list_attempts
from frontdoor_webhooks.delivered_batch import DeliveredBatch
from frontdoor_webhooks.delivery import claim
from frontdoor_webhooks.sender import SenderResponse


async def _failing_endpoint(runtime: Runtime, actor: Actor, kek: Kek, url: str) -> str:
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=url, kek=kek, now=runtime.clock(),
                                        event_types=["operation.succeeded"], allow_insecure=True)
        await conn.execute("UPDATE webhook_endpoints SET failing_since = $3 WHERE tenant_id = $1 AND id = $2",
                           actor.tenant_id, created.endpoint.id, runtime.clock() - timedelta(minutes=10))
    return created.endpoint.id


async def test_one_statement_records_the_batch_and_leaves_a_lost_claim_to_its_new_holder(
        runtime: Runtime, actor: Actor, kek: Kek) -> None:
    tenant = actor.tenant_id
    a = await _failing_endpoint(runtime, actor, kek, "http://127.0.0.1:9/a")
    b = await _failing_endpoint(runtime, actor, kek, "http://127.0.0.1:9/b")
    now = runtime.clock()
    async with runtime.pool.acquire() as conn:
        ids = [await enqueue_message(conn, tenant, ep, "operation.succeeded", {"n": i}, purpose="event", now=now)
               for i, ep in enumerate((a, a, b))]
        claims = [await claim(conn, i, now, timedelta(seconds=30)) for i in ids]
        # The third claim is lost: its lease was taken over (another process, after an expiry).
        await conn.execute("UPDATE webhook_messages SET locked_until = locked_until + interval '1 minute'"
                           " WHERE tenant_id = $1 AND id = $2", tenant, ids[2])
    assert all(c is not None for c in claims)
    batch = DeliveredBatch(runtime.pool, max_wait=0.05)
    headers = {"webhook-id": "x", "webhook-signature": "v1,secret-looking", "content-type": "application/json"}
    ended = runtime.clock()

    reports = await asyncio.gather(*(
        batch.record(c, started_at=now, duration_ms=7, response=SenderResponse(status=200, headers={},
                                                                                 body=b'{"ok":true}'),
                     headers=headers, ended=ended) for c in claims if c is not None))

    assert batch.batches == 1
    assert [(r.message_id, r.state, r.recorded, r.status) for r in reports] == [
        (ids[0], "delivered", True, 200), (ids[1], "delivered", True, 200), (ids[2], "pending", False, 200)]
    assert reports[0].response_json == {"ok": True}
    async with runtime.pool.acquire() as conn:
        messages = [await get_message(conn, tenant, i) for i in ids]
        attempts: list[Any] = [await list_attempts(conn, tenant, i) for i in ids]
        health = dict(await conn.fetch("SELECT id, failing_since FROM webhook_endpoints WHERE tenant_id = $1"
                                       " AND id = ANY($2)", tenant, [a, b]))
        lost = await conn.fetchrow("SELECT attempts, locked_until FROM webhook_messages WHERE tenant_id = $1"
                                   " AND id = $2", tenant, ids[2])
    assert [m.state for m in messages] == ["delivered", "delivered", "pending"]
    assert messages[0].last_status == 200 and messages[0].delivered_at == ended
    assert lost["attempts"] == 1 and lost["locked_until"] is not None  # the new holder's lease is untouched
    # Every attempt made has its row (the lost one too), the signature never stored.
    for rows, c in zip(attempts, claims, strict=True):
        assert c is not None
        [row] = rows
        assert (row.attempt, row.response_status, row.error_class, row.duration_ms) == (1, 200, None, 7)
        assert row.url == c.url and row.response_excerpt == '{"ok":true}'
        assert row.request_headers == {**headers, "webhook-signature": "[redacted]"}
    # Endpoint a's messages were recorded: healthy again; b's only message was not: still failing.
    assert health[a] is None and health[b] is not None
