"""``user_requested`` (the company needs the user themselves, §7) in a relay answer, by the rule the
company API's ``POST .../user-requested`` applies (`rules.user_requested_event`, one implementation):
recorded before the answer's messages; a reason the rule refuses fails the attempt as any refused
event does (the conversation queued for a person, nothing of the answer recorded)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.ledger.test_conversation_relay import (  # noqa: F401 - fixtures
    RelayDesk,
    _events,
    _kinds,
    _refused_answer,
    _token,
    agent,
    desk,
)
from tests.support.agent import TestAgent


async def test_a_relay_answer_may_ask_for_the_user_themselves(desk: RelayDesk, agent: TestAgent,  # noqa: F811
                                                               console: AsyncTestClient[Any]) -> None:
    desk.endpoint.answer = lambda payload: httpx.Response(200, json={
        "messages": [{"id": "ask-1", "text": "I need to speak with you directly."}],
        "events": [{"type": "user_requested", "reason": "Confirm the refund yourself"},
                   {"type": "authorization", "scope": "orders:read"}]})
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Refund my order, please.")
    assert r.status_code == 201 and r.json()["status"] == "idle", r.text  # an event, not a handoff
    cid = r.json()["conversation_id"]
    page = await _events(desk, agent, token, cid)
    # The answer's events in their order, then the message.
    assert [(e["type"], e.get("reason"), e.get("scope")) for e in page["events"][2:4]] == [
        ("user_requested", "Confirm the refund yourself", None), ("authorization", None, "orders:read")]
    assert _kinds(page["events"][4:]) == [("message", "company", None), ("state", None, "idle")]
    # The company API reads the same event (as one it had added through POST .../user-requested).
    api = await desk.api("GET", f"/{cid}")
    assert api.status_code == 200, api.text
    assert [e["reason"] for e in api.json()["events"] if e["type"] == "user_requested"] == [
        "Confirm the refund yourself"]


@pytest.mark.parametrize("event", [
    pytest.param({"type": "user_requested", "reason": "   "}, id="blank-reason"),
    pytest.param({"type": "user_requested", "reason": "r" * 1001}, id="long-reason"),
    pytest.param({"type": "user_requested"}, id="no-reason"),
    pytest.param({"type": "user_requested", "reason": "Why", "extra": 1}, id="unknown-field"),
    pytest.param({"type": "user_requested", "reason": "Wh\u0000y"}, id="nul-reason"),
])
async def test_a_relay_answer_with_a_reason_the_rule_refuses_is_a_failure(
        desk: RelayDesk, agent: TestAgent, console: AsyncTestClient[Any], tenant: TenantHandle,  # noqa: F811
        event: dict[str, Any]) -> None:
    await _refused_answer(desk, agent, console, tenant, event)


@pytest.mark.parametrize(("reason", "status"), [("Confirm the refund yourself", 201), ("   ", 400),
                                                ("r" * 1000, 201), ("r" * 1001, 400)])
async def test_the_company_api_applies_the_same_rule(desk: RelayDesk, agent: TestAgent,  # noqa: F811
                                                     reason: str, status: int) -> None:
    desk.endpoint.answer = lambda payload: httpx.Response(202)  # nothing now: the company answers through the API
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Refund my order, please.")
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    r = await desk.api("POST", f"/{cid}/user-requested", {"reason": reason})
    assert r.status_code == status, r.text
    if status == 400:
        assert r.json()["code"] == "invalid_request"
    page = await _events(desk, agent, token, cid)
    assert [e.get("reason") for e in page["events"] if e["type"] == "user_requested"] == (
        [reason] if status == 201 else [])
