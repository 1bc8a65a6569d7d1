"""An agent's request cancelled right after its message was committed (the client went away, the
ledger stopping) still has the first delivery attempted at once, by this process, not a full lease
later by a deliverer: the step after the commit that starts the attempts (and wakes readers) is
shielded from the request's cancellation. Both modes: the ``conversation.message.created``
webhook, and the relay to the company's own endpoint (ADR 0006, addendum).

No deliverer runs and the clock is not moved, so whatever arrives was sent by the ledger within
its own claim (attempt 1, the lease still running). Before: nothing arrived until the lease ended."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from frontdoor_conversations import store as conversations

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.test_conversation_relay import make_relay_desk
from tests.integration.ledger.test_ledger_conversations import Desk, make_desk
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.eventually import eventually
from tests.support.mock_web import MockWeb


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


@pytest.mark.parametrize("mode", ["webhook", "relay"])
@pytest.mark.parametrize("route", ["start", "message"])
async def test_a_request_cancelled_after_the_commit_still_attempts_at_once(
        console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
        web: MockWeb, agent: TestAgent, runtime: Any, monkeypatch: pytest.MonkeyPatch, mode: str,
        route: str) -> None:
    desk: Desk = await (make_desk if mode == "webhook" else make_relay_desk)(console, issuer, ledger, tenant, clock,
                                                                               store, web)
    desk.support.reply = False
    received: list[dict[str, Any]] = desk.support.deliveries if mode == "webhook" else desk.endpoint.requests  # type: ignore[attr-defined]
    token = str((await desk.company.session(agent, unique("usr_")))["access_token"])
    path = ""
    if route == "message":
        r = await desk.start(agent, token, "First.")
        assert r.status_code == 201, r.text
        path = f"/{r.json()['conversation_id']}/messages"
    before = len(received)
    write = conversations.start if route == "start" else conversations.post_message
    cancelled: list[bool] = []

    async def committed_then_cancelled(*args: Any, **kwargs: Any) -> Any:
        posted = await write(*args, **kwargs)  # committed
        task = asyncio.current_task()  # the agent's request, in the ledger's event loop
        assert task is not None
        task.cancel()  # cancelled at its next await, as when the client goes away
        cancelled.append(True)
        return posted

    monkeypatch.setattr(conversations, "start" if route == "start" else "post_message", committed_then_cancelled)
    body = {"message": {"id": unique("msg_"), "sender": "agent", "text": "Still there?"}}
    with pytest.raises(BaseException) as raised:  # no answer: the request was cancelled
        r = await desk.call(agent, token, "POST", path, body)
        pytest.fail(f"answered: {r.status_code} {r.text}")
    assert cancelled == [True] and not isinstance(raised.value, pytest.fail.Exception), raised.value

    async def arrived() -> None:
        assert len(received) == before + 1
        assert received[-1]["data"]["message"]["text"] == "Still there?"
        async with runtime.pool.acquire() as conn:  # sent by the ledger within its own claim: attempt 1
            attempts = await conn.fetch(
                "SELECT a.attempt FROM webhook_attempts a JOIN webhook_messages m ON m.tenant_id = a.tenant_id"
                " AND m.id = a.message_id WHERE a.tenant_id = $1 AND m.body::jsonb->'data'->'message'->>'text'"
                " = 'Still there?'", tenant.id)
        assert [a["attempt"] for a in attempts] == [1]  # (recorded once the answer's settle commits)

    await eventually(arrived, timeout=30)  # no deliverer runs: only the ledger can have sent it
