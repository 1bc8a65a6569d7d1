"""The confirm writes its perform message already claimed by the ledger's fast path (issue #13 §4).

`ledger.confirm_claimed` (what the agent's confirm uses when the ledger performs) inserts the
perform message with its first attempt's lease (`frontdoor_webhooks.delivery.enqueue_claimed`)
instead of inserting it, notifying every deliverer and claiming it in a second statement. What
must still hold (OPS-6-02, at most once; OPS-6-03, never lost):

- the lease is the ledger's alone while it runs: no deliverer claims the message, and none is
  woken for it;
- should the ledger die before its attempt, the message is claimed by a deliverer once the lease
  ends, with the same ``webhook-id`` (its attempt 2);
- a message for an endpoint disabled meanwhile is parked and unclaimed, as before;
- the fast path sends exactly one attempt, signed with the endpoint's secret.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from frontdoor_operations import ledger
from frontdoor_webhooks.claims import claim_due
from frontdoor_webhooks.messages import NOTIFY_CHANNEL

from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_operations import proposed
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock

LEASE = timedelta(seconds=45)


async def _notifications_until_marker(runtime: Any, act: Any) -> list[str]:
    """The payloads on the deliverers' channel while ``act`` runs, up to a marker sent after it.

    Notifications arrive in commit order, so once the marker (sent after ``act`` committed) is
    received, any notification ``act`` sent has been received too: no waiting on a timer.
    """
    got: list[str] = []
    marker_seen = asyncio.Event()
    marker = "marker-after-the-confirm"

    def on(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == marker:
            marker_seen.set()
        else:
            got.append(payload)

    async with runtime.pool.acquire() as listener:
        await listener.add_listener(NOTIFY_CHANNEL, on)
        try:
            await act()
            async with runtime.pool.acquire() as conn:
                await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, marker)
            await asyncio.wait_for(marker_seen.wait(), 10)
        finally:
            await listener.remove_listener(NOTIFY_CHANNEL, on)
    return got


async def test_the_perform_message_is_written_claimed_and_wakes_no_deliverer(
        shop: Shop, agent: TestAgent, runtime: Any, clock: ShiftableClock) -> None:
    """OPS-6-02: the claim comes with the insert (attempt 1, the lease from the confirm's time); no NOTIFY."""
    _, _, op = await proposed(shop, agent)
    now = clock()
    out: dict[str, Any] = {}

    async def confirm() -> None:
        async with runtime.pool.acquire() as conn:
            out["result"] = await ledger.confirm_claimed(
                conn, shop.tenant.id, op["operation_id"], revision=op["revision"], approved_by="user", via="agent",
                now=now, lease=LEASE)

    payloads = await _notifications_until_marker(runtime, confirm)
    current, message_id, claim = out["result"]
    assert current.state == "in_progress" and message_id is not None and claim is not None
    assert claim.message.id == message_id and claim.message.attempt == 1
    assert claim.message.locked_until == now + LEASE
    assert claim.message.purpose == "perform" and claim.message.operation_id == op["operation_id"]
    assert claim.message.url == f"https://{shop.tenant.slug}.shop.example/webhooks/frontdoor"
    assert claim.secret_rows and all(isinstance(blob, bytes) for _, blob in claim.secret_rows)
    assert message_id not in payloads, payloads
    async with runtime.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT state, attempts, locked_until, parked, next_attempt_at FROM webhook_messages"
                                  " WHERE tenant_id = $1 AND id = $2", shop.tenant.id, message_id)
    assert dict(row) == {"state": "pending", "attempts": 1, "locked_until": now + LEASE, "parked": False,
                         "next_attempt_at": now}


async def test_a_ledger_that_dies_before_its_attempt_leaves_the_message_to_a_deliverer_after_the_lease(
        shop: Shop, agent: TestAgent, runtime: Any, clock: ShiftableClock) -> None:
    """OPS-6-03: nothing is lost. While the lease runs no deliverer claims it; after, one does (attempt 2)."""
    _, _, op = await proposed(shop, agent)
    now = clock()
    async with runtime.pool.acquire() as conn:
        _, message_id, claim = await ledger.confirm_claimed(
            conn, shop.tenant.id, op["operation_id"], revision=op["revision"], approved_by="user", via="agent",
            now=now, lease=LEASE)
    assert claim is not None  # ... and the process holding it dies here, before sending anything

    async def claims_at(moment: Any) -> list[str]:
        async with runtime.pool.acquire() as conn:
            claimed, _ = await claim_due(conn, moment, LEASE, limit=64, choose=lambda found: found)
        return [c.id for c, _ in claimed]

    assert message_id not in await claims_at(now + LEASE - timedelta(seconds=1))
    taken = await claims_at(now + LEASE + timedelta(seconds=1))
    assert message_id in taken
    async with runtime.pool.acquire() as conn:
        attempts = await conn.fetchval("SELECT attempts FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
                                       shop.tenant.id, message_id)
    assert attempts == 2  # the same message (same webhook-id), its second attempt


async def test_a_message_for_an_endpoint_disabled_meanwhile_is_parked_and_not_claimed(
        shop: Shop, agent: TestAgent, runtime: Any, clock: ShiftableClock) -> None:
    """The endpoint disabled between the confirm's read and its compare-and-set: parked, as `confirm` writes it."""
    _, _, op = await proposed(shop, agent)
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE webhook_endpoints SET enabled = false WHERE tenant_id = $1 AND id = $2",
                           shop.tenant.id, shop.endpoint_id)
        try:
            current, message_id, claim = await ledger.confirm_claimed(
                conn, shop.tenant.id, op["operation_id"], revision=op["revision"], approved_by="user", via="agent",
                now=clock(), lease=LEASE)
            row = await conn.fetchrow("SELECT attempts, locked_until, parked FROM webhook_messages"
                                      " WHERE tenant_id = $1 AND id = $2", shop.tenant.id, message_id)
        finally:
            await conn.execute("UPDATE webhook_endpoints SET enabled = true WHERE tenant_id = $1 AND id = $2",
                               shop.tenant.id, shop.endpoint_id)
    assert current.state == "in_progress" and message_id is not None
    assert claim is None
    assert dict(row) == {"attempts": 0, "locked_until": None, "parked": True}


async def test_a_losing_confirm_writes_and_claims_nothing(shop: Shop, agent: TestAgent, runtime: Any,
                                                          clock: ShiftableClock) -> None:
    """OPS-6-02: a second confirm of the same revision does not win: no message, no claim."""
    _, _, op = await proposed(shop, agent)
    async with runtime.pool.acquire() as conn:
        _, first, _ = await ledger.confirm_claimed(conn, shop.tenant.id, op["operation_id"], revision=op["revision"],
                                                   approved_by="user", via="agent", now=clock(), lease=LEASE)
        current, second, claim = await ledger.confirm_claimed(
            conn, shop.tenant.id, op["operation_id"], revision=op["revision"], approved_by="user", via="agent",
            now=clock(), lease=LEASE)
        count = await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND operation_id = $2"
                                    " AND purpose = 'perform'", shop.tenant.id, op["operation_id"])
    assert first is not None and second is None and claim is None
    assert current.state == "in_progress" and count == 1


async def test_the_fast_path_sends_its_claimed_message_once_and_signed(shop: Shop, agent: TestAgent,
                                                                       runtime: Any) -> None:
    """OPS-3-02, OPS-6-02: through the agent's confirm, one attempt (attempt 1), verified by the receiver."""
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    async with runtime.pool.acquire() as conn:
        message = await conn.fetchrow(
            "SELECT id, attempts, state, locked_until, superseded_at IS NOT NULL AS stopped FROM webhook_messages"
            " WHERE tenant_id = $1"
            " AND operation_id = $2 AND purpose = 'perform'", shop.tenant.id, op["operation_id"])
        attempts = await conn.fetch("SELECT attempt, response_status FROM webhook_attempts WHERE tenant_id = $1"
                                    " AND message_id = $2", shop.tenant.id, message["id"])
    assert message["attempts"] == 1 and message["locked_until"] is None
    assert message["state"] == "delivered" and message["stopped"]  # delivered, and never sent again
    assert [(a["attempt"], a["response_status"]) for a in attempts] == [(1, 200)]
    assert shop.receiver.performed == {op["operation_id"]: 1}  # verified with the endpoint's secret
    assert shop.receiver.webhook_ids == [message["id"]]
