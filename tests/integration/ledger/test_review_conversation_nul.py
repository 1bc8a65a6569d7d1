"""A NUL character in an agent's message (PostgreSQL's text and jsonb cannot store one) is refused
at the hosted conversation endpoint as ``400 invalid_request`` before anything is written, for a
0.2 Session Token and a PAP 1.0 ``Poppy-Session`` alike (the rule of the httpkit's JSON guard,
`frontdoor_httpkit.has_nul`). Before: ``store.start`` raised asyncpg's
``UntranslatableCharacterError`` and the agent read ``500 server_error``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique
from tests.integration.ledger.test_ledger_conversations import Desk, agent, desk  # noqa: F401 - fixtures
from tests.support.agent import TestAgent

_MESSAGES: dict[str, dict[str, Any]] = {
    "text": {"text": "nul \x00 here"},
    "data key": {"data": {"a\x00": 1}},
    "data value": {"data": {"a": ["x", "\x00"]}},
    "context": {"context": {"note\x00": "x"}},
    "context value": {"text": "hi", "context": {"locale": "en-GB", "extra": "\x00"}},
}


async def _kept(runtime: Any, tenant_id: str) -> tuple[int, int]:
    async with runtime.pool.acquire() as conn:
        return (await conn.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1", tenant_id),
                await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1", tenant_id))


@pytest.mark.parametrize("member", list(_MESSAGES.values()), ids=list(_MESSAGES))
async def test_a_nul_in_a_new_conversation_is_invalid_request(desk: Desk, agent: TestAgent, runtime: Any,  # noqa: F811
                                                              member: dict[str, Any]) -> None:
    token = str((await desk.company.session(agent, unique("usr_")))["access_token"])
    r = await desk.call(agent, token, "POST", "", {"message": {"id": unique("msg_"), "sender": "agent", **member}})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_request"), r.text
    assert await _kept(runtime, desk.company.tenant.id) == (0, 0)
    assert desk.support.deliveries == []


async def test_a_nul_in_a_later_message_or_the_path_is_invalid_request(desk: Desk, agent: TestAgent,  # noqa: F811
                                                                       runtime: Any) -> None:
    token = str((await desk.company.session(agent, unique("usr_")))["access_token"])
    r = await desk.start(agent, token, "Hello.")
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    before = await _kept(runtime, desk.company.tenant.id)
    for member in _MESSAGES.values():
        r = await desk.call(agent, token, "POST", f"/{cid}/messages",
                            {"message": {"id": unique("msg_"), "sender": "agent", **member}})
        assert (r.status_code, r.json()["error"]) == (400, "invalid_request"), r.text
    for method, path in (("POST", "/cnv%00x/messages"), ("GET", "/cnv%00x/events"), ("POST", "/cnv%00x/close"),
                         ("POST", "/cnv%00x/handoff")):
        body = {"message": {"id": unique("msg_"), "sender": "agent", "text": "x"}} if "messages" in path else None
        r = await desk.call(agent, token, method, path, body)
        assert (r.status_code, r.json()["error"]) == (400, "invalid_request"), (path, r.text)
    r = await desk.call(agent, token, "GET", f"/{cid}/events", query="cursor=ev%00")
    assert (r.status_code, r.json()["error"]) == (400, "invalid_request"), r.text
    assert await _kept(runtime, desk.company.tenant.id) == before
    assert len(desk.support.deliveries) == 1
