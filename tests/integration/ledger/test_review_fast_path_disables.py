"""The ledger's own first delivery of a ``conversation.message.created`` webhook (its fast path,
`ConversationsHub`), or of a confirm's perform webhook (`Performer`), that disables the endpoint (``410 Gone``) queues for a person the conversations
whose relay waits for that endpoint, as the dispatcher's deliverer does after such an attempt.
Before: they stayed ``working`` until the endpoint was enabled again.

The endpoint is both subscribed to ``conversation.message.created`` and the target of a relay left
by a ledger that died after committing it (`store.start` with a ``RelayTarget``, never attempted).
No deliverer runs: the queueing is the ledger's."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import make_shop, operations_agent
from tests.integration.ledger.test_conversation_relay_endpoint_stopped import _state, _stranded_relay
from tests.integration.ledger.test_ledger_conversations import Desk, make_desk
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.eventually import eventually
from tests.support.mock_web import MockWeb


async def test_the_ledgers_own_delivery_that_disables_the_endpoint_queues_its_waiting_relays(
        console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
        web: MockWeb, runtime: Any) -> None:
    desk: Desk = await make_desk(console, issuer, ledger, tenant, clock, store, web)
    async with runtime.pool.acquire() as conn:
        endpoint_id = await conn.fetchval("SELECT id FROM webhook_endpoints WHERE tenant_id = $1", tenant.id)
    waiting, _ = await _stranded_relay(runtime, tenant.id, endpoint_id, "Anyone?")
    gone: list[bytes] = []

    async def answer_gone(request: httpx.Request) -> httpx.Response:
        gone.append(request.content)
        return httpx.Response(410, text="gone")

    web.handle(f"https://{tenant.slug}.support.example/webhooks/conversations", answer_gone)
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    token = str((await desk.company.session(agent, unique("usr_")))["access_token"])
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201, r.text

    async def disabled_and_queued() -> None:
        assert len(gone) == 1
        async with runtime.pool.acquire() as conn:
            assert await conn.fetchval("SELECT disabled_at IS NOT NULL FROM webhook_endpoints WHERE tenant_id = $1"
                                       " AND id = $2", tenant.id, endpoint_id)
        status, responder, events = await _state(runtime, tenant.id, waiting)
        assert (status, responder) == ("queued", "agent")
        assert events == [("message", None), ("state", "working"), ("state", "queued")]

    await eventually(disabled_and_queued, timeout=10)


async def test_the_ledgers_own_perform_webhook_that_disables_the_endpoint_queues_its_waiting_relays(
        console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
        web: MockWeb, runtime: Any) -> None:
    """The confirm's perform webhook (`Performer`), sent by the ledger at once, answered ``410 Gone``."""
    shop = await make_shop(console, issuer, ledger, tenant, clock, store, web)
    waiting, _ = await _stranded_relay(runtime, tenant.id, shop.endpoint_id, "Anyone?")
    gone: list[bytes] = []

    async def answer_gone(request: httpx.Request) -> httpx.Response:
        gone.append(request.content)
        return httpx.Response(410, text="gone")

    web.handle(f"https://{tenant.slug}.shop.example/webhooks/frontdoor", answer_gone)
    agent = operations_agent(web)
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    r = await shop.propose(tokens, agent, user)
    assert r.status_code == 201, r.text
    r = await shop.confirm(agent, tokens["access_token"], r.json()["operation"])
    assert r.status_code in (200, 202), r.text

    async def disabled_and_queued() -> None:
        assert len(gone) == 1
        status, responder, events = await _state(runtime, tenant.id, waiting)
        assert (status, responder) == ("queued", "agent")
        assert events == [("message", None), ("state", "working"), ("state", "queued")]

    await eventually(disabled_and_queued, timeout=10)
