"""A relay waiting for a deliverer whose endpoint is then disabled or deleted: the conversation is
queued for a person, as when a relay fails (docs/conversations.md; ADR 0006, addendum).

The relay is left as a ledger that died after the agent's message committed leaves it: written
and leased with the message (``store.start`` with a ``RelayTarget``), never attempted. The
endpoint is then disabled or deleted through the management API or the dashboard, or disabled
automatically by another relay's attempt or by a delivery."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest
from frontdoor_conversations import IncomingMessage, store
from frontdoor_conversations.relay import RelayTarget
from frontdoor_conversations.rules import Caller
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.console.test_dashboard import sign_in
from tests.integration.dispatcher.test_deliverer import running
from tests.integration.ledger.test_conversation_relay import RelayDesk, _token, agent, desk  # noqa: F401 - fixtures
from tests.integration.ledger.test_conversation_relay_recovery import _deliverer
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.eventually import eventually

LEASE = timedelta(seconds=30)  # the dead writer's claim: longer than the test


async def _endpoint(console: AsyncTestClient[Any], auth: dict[str, str]) -> str:
    r = await console.post("/api/v1/webhook-endpoints", headers=auth,
                           json={"url": f"https://{unique('relay-')}.example/relay", "description": "relay"})
    assert r.status_code == 201, r.text
    return str(r.json()["endpoint"]["id"])


async def _stranded_relay(runtime: Runtime, tenant_id: str, endpoint_id: str, text: str) -> tuple[str, str]:
    """An agent's message whose relay was written and leased, never sent (its ledger died)."""
    caller = Caller(client_id="https://agent.example/client", user_id=unique("usr_"), session_id=unique("ses_"))
    async with runtime.pool.acquire() as conn:
        posted = await store.start(conn, tenant_id, caller, IncomingMessage(id=unique("m-"), sender="agent", text=text),
                                   parent_id=None, now=runtime.clock(),
                                   relay=RelayTarget(endpoint_id=endpoint_id, lease=LEASE))
    assert posted.relay is not None and posted.conversation.status == "working"
    return posted.conversation.id, posted.relay.id


async def _state(runtime: Runtime, tenant_id: str, cid: str) -> tuple[str, str, list[tuple[str, Any]]]:
    async with runtime.pool.acquire() as conn:
        conversation = await store.find(conn, tenant_id, cid)
        assert conversation is not None
        page = await store.read_page(conn, conversation, None)
    return conversation.status, conversation.responder, [(e["type"], e.get("status")) for e in page.events]


async def _relay_row(runtime: Runtime, tenant_id: str, relay_id: str) -> tuple[str, bool] | None:
    async with runtime.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT state, parked FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
                                  tenant_id, relay_id)
    return None if row is None else (row["state"], row["parked"])


WAITING = [("message", None), ("state", "working")]
QUEUED = [("message", None), ("state", "working"), ("state", "queued")]


async def _stop(console: AsyncTestClient[Any], auth: dict[str, str], endpoint_id: str, how: str) -> int:
    if how == "api-disable":
        r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/disable", headers=auth)
        assert r.status_code in (200, 404), r.text
        if r.status_code == 200:
            assert r.json()["enabled"] is False and r.json()["disabled_reason"] == "manual"
        return r.status_code
    r = await console.delete(f"/api/v1/webhook-endpoints/{endpoint_id}", headers=auth)
    assert r.status_code in (204, 404), r.text
    return r.status_code


@pytest.mark.parametrize("how", ["api-disable", "api-delete"])
async def test_a_waiting_relay_whose_endpoint_stops_queues_its_conversation_for_a_person(
        console: AsyncTestClient[Any], runtime: Runtime, how: str) -> None:
    tenant = await sign_up(console)
    other = await sign_up(console)
    endpoint_id = await _endpoint(console, tenant.auth)
    spare_id = await _endpoint(console, tenant.auth)  # another endpoint of the tenant, with its own waiting relay
    cid, relay_id = await _stranded_relay(runtime, tenant.id, endpoint_id, "Where is my order?")
    spare_cid, spare_relay = await _stranded_relay(runtime, tenant.id, spare_id, "And my invoice?")
    assert (await _state(runtime, tenant.id, cid))[:2] == ("working", "agent")

    # Another organisation cannot stop it (404), and nothing of this tenant's changes.
    assert await _stop(console, other.auth, endpoint_id, how) == 404
    assert await _state(runtime, tenant.id, cid) == ("working", "agent", WAITING)
    assert await _relay_row(runtime, tenant.id, relay_id) == ("pending", False)

    assert await _stop(console, tenant.auth, endpoint_id, how) in (200, 204)
    # The agent reads the conversation queued for a person (a state event), as after a failed relay.
    assert await _state(runtime, tenant.id, cid) == ("queued", "agent", QUEUED)
    if how == "api-disable":  # the relay itself waits, parked, with the endpoint's other messages
        assert await _relay_row(runtime, tenant.id, relay_id) == ("pending", True)
    else:  # it went with the endpoint
        assert await _relay_row(runtime, tenant.id, relay_id) is None
    # The tenant's other endpoint and its relay are untouched.
    assert await _state(runtime, tenant.id, spare_cid) == ("working", "agent", WAITING)
    assert await _relay_row(runtime, tenant.id, spare_relay) == ("pending", False)


async def test_disabling_again_or_a_closed_conversation_adds_nothing(
        console: AsyncTestClient[Any], runtime: Runtime) -> None:
    tenant = await sign_up(console)
    endpoint_id = await _endpoint(console, tenant.auth)
    cid, _ = await _stranded_relay(runtime, tenant.id, endpoint_id, "Where is my order?")
    closed, _ = await _stranded_relay(runtime, tenant.id, endpoint_id, "Never mind.")
    async with runtime.pool.acquire() as conn:
        await store.close(conn, tenant.id, closed, now=runtime.clock())
    before_closed = await _state(runtime, tenant.id, closed)
    assert await _stop(console, tenant.auth, endpoint_id, "api-disable") == 200
    assert await _state(runtime, tenant.id, cid) == ("queued", "agent", QUEUED)
    assert await _state(runtime, tenant.id, closed) == before_closed  # closed stays closed, no event
    assert await _stop(console, tenant.auth, endpoint_id, "api-disable") == 200  # idempotent: one state event
    assert await _state(runtime, tenant.id, cid) == ("queued", "agent", QUEUED)


async def test_the_dashboard_disable_and_delete_queue_the_conversation_too(
        console: AsyncTestClient[Any], runtime: Runtime) -> None:
    tenant = await sign_up(console)
    disabled = await _endpoint(console, tenant.auth)
    deleted = await _endpoint(console, tenant.auth)
    cid_disabled, _ = await _stranded_relay(runtime, tenant.id, disabled, "Where is my order?")
    cid_deleted, _ = await _stranded_relay(runtime, tenant.id, deleted, "And my invoice?")
    csrf = await sign_in(console, tenant.email)
    for endpoint_id, action in ((disabled, "disable"), (deleted, "delete")):
        r = await console.post(f"/webhooks/{endpoint_id}/{action}", data={"confirm": "yes", "_csrf_token": csrf},
                               follow_redirects=False)
        assert r.status_code == 303, r.text
    assert await _state(runtime, tenant.id, cid_disabled) == ("queued", "agent", QUEUED)
    assert await _state(runtime, tenant.id, cid_deleted) == ("queued", "agent", QUEUED)


async def test_a_relay_attempt_that_disables_the_endpoint_queues_the_other_waiting_relays(
        desk: RelayDesk, agent: TestAgent, console: AsyncTestClient[Any], tenant: TenantHandle,  # noqa: F811
        runtime: Runtime) -> None:
    """Automatic disabling (here ``410 Gone``) by a relay's own attempt, in that attempt's settle."""
    waiting, relay_id = await _stranded_relay(runtime, tenant.id, desk.endpoint_id, "Where is my order?")
    desk.endpoint.answer = lambda payload: httpx.Response(410)
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text  # its own relay failed
    endpoint = (await console.get(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)).json()
    assert (endpoint["enabled"], endpoint["disabled_reason"]) == (False, "gone")
    assert await _state(runtime, tenant.id, waiting) == ("queued", "agent", QUEUED)  # and the one left waiting
    assert await _relay_row(runtime, tenant.id, relay_id) == ("pending", True)


async def test_a_delivery_that_disables_the_endpoint_queues_its_waiting_relays(
        console: AsyncTestClient[Any], runtime: Runtime, settings: Settings, kek_value: str,
        clock: ShiftableClock) -> None:
    """Automatic disabling by an event delivery (the deliverer's), just after that attempt's commit."""
    tenant = await sign_up(console)
    attempts: list[bytes] = []

    async def gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        attempts.append(head.split(b" ", 2)[1])
        writer.write(b"HTTP/1.1 410 Gone\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(gone, "127.0.0.1", 0)
    try:
        r = await console.post("/api/v1/webhook-endpoints", headers=tenant.auth, json={
            "url": f"https://{unique('relay-')}.example/relay", "event_types": ["conversation.message.created"]})
        assert r.status_code == 201, r.text
        endpoint_id = str(r.json()["endpoint"]["id"])
        async with runtime.pool.acquire() as conn:  # the company's server on this machine (plain http, loopback)
            await conn.execute("UPDATE webhook_endpoints SET url = $3 WHERE tenant_id = $1 AND id = $2", tenant.id,
                               endpoint_id, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/relay")
        # The agent's message: its relay leased to a ledger that died, its conversation.message.created
        # event due at once for the deliverer.
        cid, relay_id = await _stranded_relay(runtime, tenant.id, endpoint_id, "Where is my order?")
        async with running(_deliverer(runtime, settings, kek_value, clock, tenant.id)):
            async def queued() -> None:
                assert (await _state(runtime, tenant.id, cid))[0] == "queued"

            await eventually(queued, timeout=30)
        assert attempts == [b"/relay"]  # the event's attempt only: the relay is still leased
        endpoint = (await console.get(f"/api/v1/webhook-endpoints/{endpoint_id}", headers=tenant.auth)).json()
        assert (endpoint["enabled"], endpoint["disabled_reason"]) == (False, "gone")
        assert await _state(runtime, tenant.id, cid) == ("queued", "agent", QUEUED)
        assert await _relay_row(runtime, tenant.id, relay_id) == ("pending", True)
    finally:
        server.close()
