"""A hosted conversation's webhook messages are the writing ledger's to send first (#15 §2).

Found by the peer suite through the replicated stack (`tests/e2e/test_replicas_conformance.py`):
the ``conversation.message.created`` messages a user's message writes announce themselves at
commit (``pg_notify``), and a deliverer process woken by it could claim one before the ledger
that wrote it tried; the ledger's own attempt then found it held, and the agent's request was
answered ``working`` at once, before the company agent's reply it is meant to wait for
(``FRONTDOOR_CONVERSATION_REPLY_WAIT``). The ledger now claims them in the message's
transaction (as the relay mode's relay): a deliverer woken at that moment finds nothing to
claim, and the agent's answer carries the reply.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from frontdoor_webhooks.delivery import claim

from tests.conftest import unique
from tests.integration.ledger.test_ledger_conversations import Desk, _session, agent, desk  # noqa: F401 - fixtures
from tests.support.agent import TestAgent


@pytest.fixture
def eager_deliverer(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> list[str]:  # noqa: F811
    """A deliverer that wakes at the commit, before the ledger's own attempt: right after the
    ledger announces the new events (``hub.changed``, between the commit and its attempt), it
    claims every pending message of the tenant it can, as a deliverer's claim would. Answers
    the IDs it got (it never sends them: a claim is all it takes to beat the ledger)."""
    hub = desk.ledger.app.state.conversations
    ctx = desk.ledger.app.state.ctx  # its pool is the app's (its event loop's), as another process's would be
    announced = hub.changed
    taken: list[str] = []

    async def changed(tenant_id: str, conversation_id: str) -> None:
        await announced(tenant_id, conversation_id)
        async with ctx.pool.acquire() as conn:
            pending = await conn.fetch("SELECT id FROM webhook_messages WHERE tenant_id = $1 AND state = 'pending'",
                                       tenant_id)
            for row in pending:
                held = await claim(conn, row["id"], ctx.now(), timedelta(seconds=45), tenant_id=tenant_id)
                if held is not None:
                    taken.append(held.id)

    monkeypatch.setattr(hub, "changed", changed)
    return taken


async def test_a_deliverer_woken_at_the_commit_cannot_take_the_ledgers_first_delivery(
        desk: Desk, agent: TestAgent, eager_deliverer: list[str], runtime: Any) -> None:  # noqa: F811
    token = await _session(desk, agent, unique("usr_"))
    r = await desk.start(agent, token, "Where is my order?")
    assert r.status_code == 201, r.text
    # The ledger delivered the webhook itself and waited: the company agent's reply is in, the
    # conversation idle again (PAP-7.7-01), not ``working`` with the reply still to come.
    assert r.json()["status"] == "idle", (r.json(), eager_deliverer)
    assert eager_deliverer == []  # the messages were the ledger's already
    [delivery] = desk.support.deliveries
    conversation = r.json()["conversation_id"]
    assert delivery["data"]["conversation_id"] == conversation
    page = (await desk.call(agent, token, "GET", f"/{conversation}/events")).json()
    replies = [e["message"]["text"] for e in page["events"] if e["type"] == "message" and e["message"]["role"] == "company"]
    assert replies == ["Hello!"]
    # The same for a message continuing the conversation (its own webhook message).
    r = await desk.call(agent, token, "POST", f"/{conversation}/messages",
                        {"message": {"id": unique("msg_"), "sender": "agent", "text": "And my invoice?"}})
    assert r.status_code == 202, r.text
    assert eager_deliverer == [] and r.json()["status"] == "idle", r.json()
    assert len(desk.support.deliveries) == 2
    async with runtime.pool.acquire() as conn:
        states = await conn.fetch("SELECT state, attempts FROM webhook_messages WHERE tenant_id = $1",
                                  desk.company.tenant.id)
    assert [(s["state"], s["attempts"]) for s in states] == [("delivered", 1), ("delivered", 1)]
