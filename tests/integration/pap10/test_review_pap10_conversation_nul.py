"""A PAP 1.0 caller's message with a NUL character is refused like a 0.2 caller's: ``400
invalid_request``, nothing written (the same route; see
``tests/integration/ledger/test_review_conversation_nul.py``)."""

from __future__ import annotations

from typing import Any

from tests.conftest import unique
from tests.integration.pap10.conftest import new_agent
from tests.integration.pap10.test_pap10_conversations import Desk1, desk  # noqa: F401  (the fixture)
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Session


async def test_a_1_0_callers_nul_is_invalid_request(desk: Desk1, web: MockWeb, clock: ShiftableClock,  # noqa: F811
                                                    runtime: Any) -> None:
    agent, user = new_agent(web, clock), Session(sub=unique("user-"))
    for member in ({"text": "nul \x00"}, {"data": {"k\x00": 1}}, {"context": {"x": "\x00"}}):
        body = {"message": {"id": unique("msg_"), "sender": "agent", **member}}
        r = await desk.request(agent, user, "POST", desk.conversations(), body=body, signed_in=False)
        assert (r.status_code, r.json()["error"]) == (400, "invalid_request"), r.text
    async with runtime.pool.acquire() as conn:
        kept = await conn.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1", desk.tenant.id)
    assert kept == 0 and desk.support.deliveries == []
    r = await desk.say(agent, user, text="Hello.", signed_in=False)  # the same caller, without the NUL
    assert r.status_code == 201, r.text
