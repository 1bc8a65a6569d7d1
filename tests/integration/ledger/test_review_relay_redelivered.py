"""A relay whose answer was recorded, sent again (an operator's redelivery) and failing this
time, leaves the conversation as it is: its answer is not missing, so no person is asked for.
Before, the failed attempt queued the (idle, answered) conversation."""

from __future__ import annotations

from typing import Any

import httpx
from frontdoor_core.outbound import SafeFetcher
from frontdoor_dispatcher.deliverer import Deliverer
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.sender import SafeSender

from tests.integration.conftest import TenantHandle
from tests.integration.dispatcher.test_deliverer import POLICY, _TenantsLanes, running
from tests.integration.ledger.test_conversation_relay import (  # noqa: F401 - fixtures
    RelayDesk,
    _events,
    _relay_messages,
    _token,
    agent,
    desk,
)
from tests.support.agent import TestAgent
from tests.support.eventually import eventually
from tests.support.mock_web import MockWeb


async def test_a_redelivered_answered_relay_that_fails_leaves_the_conversation_alone(
        desk: RelayDesk, agent: TestAgent, console: Any, tenant: TenantHandle, runtime: Any, web: MockWeb,  # noqa: F811
        kek_value: str) -> None:
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201 and r.json()["status"] == "idle", r.text  # answered and recorded
    cid = r.json()["conversation_id"]
    [relay] = await _relay_messages(console, tenant, desk.endpoint_id)
    desk.endpoint.answer = lambda payload: httpx.Response(500)
    r = await console.post(f"/api/v1/webhook-messages/{relay['id']}/redeliver", headers=tenant.auth)
    assert r.status_code in (200, 202), r.text
    deliverer = Deliverer(runtime.settings.database_url, runtime.pool, sender=SafeSender(SafeFetcher(transport=web)),
                          kek=Kek.from_env_value(kek_value), policy=POLICY, clock=runtime.clock, idle_wake=0.2,
                          lanes=_TenantsLanes({tenant.id}))
    async with running(deliverer):
        async def sent_again() -> None:
            assert len(desk.endpoint.requests) == 2
            async with runtime.pool.acquire() as conn:
                state = await conn.fetchval("SELECT state FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
                                            tenant.id, relay["id"])
            assert state != "pending"

        await eventually(sent_again, timeout=20)
    page = await _events(desk, agent, token, cid)
    assert page["status"] == "idle", [e.get("status") for e in page["events"]]  # before: queued
