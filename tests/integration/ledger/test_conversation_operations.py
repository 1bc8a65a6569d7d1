"""A company's reply in a hosted conversation carries an operation it proposed (OPS-4-01, PAP §7).

``POST /v1/conversations/{id}/messages`` with ``message.operation_id``: the message the agent
reads holds the operation as the operations endpoint shows it. Only an operation of the
conversation's own agent and user (and account) in the same tenant; anything else is
``404 operation_not_found``, the same for unknown, another user's and another tenant's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import make_shop, operations_agent
from tests.integration.ledger.test_ledger_conversations import Desk, make_desk
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return operations_agent(web)


async def _with_kind(desk: Desk, console: Any, web: MockWeb) -> None:
    """The desk's tenant gets the ``order.place`` kind and its perform webhook."""
    t = desk.company.tenant
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth,
                           json={"url": f"https://{t.slug}.shop.example/perform", "description": "perform"})
    assert r.status_code == 201, r.text
    r = await console.put("/api/v1/operation-kinds/order.place", headers=t.auth, json={
        "perform_endpoint_id": r.json()["endpoint"]["id"], "scopes": ["poppy:write"],
        "default_expiry_seconds": 900, "max_expiry_seconds": 3600, "description": "Place an order"})
    assert r.status_code == 200, r.text


def _code(response: Any) -> Any:
    """The refusal's code: ``code`` of a problem (RFC 9457), or ``error`` before the API answered problems."""
    body = response.json()
    return body.get("code", body.get("error"))


async def _propose(desk: Desk, session_id: str, agent: TestAgent, user: str) -> dict[str, Any]:
    r = await desk.ledger.post(f"/{desk.slug}/v1/operations", headers=desk.support.auth, json={
        "kind": "order.place", "caller": {"session_id": session_id, "client_id": agent.client_id, "user_id": user},
        "summary": "Reorder 2 x Chai for 36.00 EUR", "terms": {"total": {"amount": "36.00", "currency": "EUR"}},
        "user_approval_required": True})
    assert r.status_code == 201, r.text
    operation: dict[str, Any] = r.json()["operation"]
    return operation


async def test_a_reply_carries_the_operation_and_only_its_own(console: Any, issuer: Any, ledger: Any,
                                                               tenant: TenantHandle, other_tenant: TenantHandle,
                                                               clock: ShiftableClock, store: Any, web: MockWeb,
                                                               agent: TestAgent) -> None:
    desk = await make_desk(console, issuer, ledger, tenant, clock, store, web)
    await _with_kind(desk, console, web)
    user = unique("usr_")
    session = await desk.company.session(agent, user)
    token = str(session["access_token"])
    cid = (await desk.start(agent, token, "Please reorder my last order.")).json()["conversation_id"]
    mine = await _propose(desk, session["session_id"], agent, user)
    also_mine = await _propose(desk, session["session_id"], agent, user)  # no action_key: another operation
    stranger = unique("usr_")
    theirs = await _propose(desk, (await desk.company.session(agent, stranger))["session_id"], agent, stranger)
    other = await make_shop(console, issuer, ledger, other_tenant, clock, store, web)
    elsewhere = await other.propose(await other.company.session(agent, user), agent, user)
    assert elsewhere.status_code == 201, elsewhere.text

    def reply(operation_id: str, message_id: str = "re_1") -> Any:
        return desk.api("POST", f"/{cid}/messages", {"message": {"id": message_id, "text": "Proposed.",
                                                                 "operation_id": operation_id}})

    carried = await reply(mine["operation_id"])
    assert carried.status_code == 201, carried.text
    assert carried.json()["message"]["operation"] == mine
    again = await reply(mine["operation_id"])  # the same reply: a no-op
    conflict = await reply(also_mine["operation_id"])  # the same ID, another operation
    assert again.status_code == 201 and conflict.status_code == 409
    assert _code(conflict) == "message_id_conflict"
    for operation_id in (theirs["operation_id"], elsewhere.json()["operation"]["operation_id"], "op_unknown_000"):
        refused = await reply(operation_id, message_id=unique("re_"))
        assert (refused.status_code, _code(refused)) == (404, "operation_not_found"), operation_id
    page = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()
    operations = [e["message"]["operation"] for e in page["events"]
                  if e["type"] == "message" and "operation" in e["message"]]
    assert operations == [mine]  # the agent reads it once, as its operations endpoint shows it
    read = await ledger.get(f"/{desk.slug}/operations/{mine['operation_id']}", headers={
        "Authorization": f"DPoP {token}",
        "DPoP": agent.dpop("GET", f"https://ledger.frontdoor.test/{desk.slug}/operations/{mine['operation_id']}",
                           token=token, iat=desk.company.now())})
    assert read.status_code == 200 and read.json()["state"] == "proposed"  # a message confirms nothing
