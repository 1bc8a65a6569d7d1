"""Hosted conversations (#16, second slice) on the wire: the human handoff from the agent's request
to a person's answer in the dashboard, the ``conversation.handoff_requested`` webhook, retention
(each tenant's ``retention_days``) and the ``cursor_expired`` that follows, and the rate limits
(``429 rate_limited`` with ``Retry-After``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from frontdoor_conversations.retention import forget_expired
from frontdoor_core.runtime import Runtime
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.integration.ledger.test_ledger_conversations import Desk, _session, agent, desk, make_desk  # noqa: F401 - fixtures
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.fixed_windows import room_in_window
from tests.support.mock_web import MockWeb


async def _subscribe_handoffs(console: AsyncTestClient[Any], t: TenantHandle) -> str:
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": f"https://{t.slug}.desk.example/handoffs", "event_types": ["conversation.handoff_requested"]})
    assert r.status_code == 201, r.text
    return str(r.json()["endpoint"]["id"])


async def test_an_agent_asks_for_a_person_and_reads_the_persons_answer(
    desk: Desk, agent: TestAgent, console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,  # noqa: F811
) -> None:
    """The journey: handoff (PAP §7.9) -> queued in the inbox and a webhook -> a member takes over in
    the dashboard and answers -> the agent reads ``responder: human``, the name and the reply."""
    endpoint = await _subscribe_handoffs(console, tenant)
    token = await _session(desk, agent, unique("usr_"))
    desk.support.reply = False  # the company's agent does not answer: a person will
    cid = (await desk.start(agent, token, "I want to talk to a person.")).json()["conversation_id"]
    for _ in range(2):  # asking again while queued is the same request
        r = await desk.call(agent, token, "POST", f"/{cid}/handoff")
        assert r.status_code == 202 and r.json()["status"] == "queued"
    hooks = await db.fetch("SELECT body FROM webhook_messages WHERE tenant_id = $1 AND endpoint_id = $2",
                           tenant.id, endpoint)
    assert len(hooks) == 1
    body = json.loads(hooks[0]["body"])
    assert body["type"] == "conversation.handoff_requested"
    assert body["data"]["conversation_id"] == cid and body["data"]["status"] == "queued"
    assert body["data"]["client_id"] == agent.client_id and "text" not in json.dumps(body["data"])

    cursor = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()["cursor"]
    csrf = await sign_in(console, tenant.email)
    assert cid in (await console.get("/conversations")).text
    r = await console.post("/conversations/display-name", data={"display_name": "Sam", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    r = await console.post(f"/conversations/{cid}/take-over", headers={"x-csrftoken": csrf}, follow_redirects=False)
    assert r.status_code == 303
    r = await console.post(f"/conversations/{cid}/reply", data={"text": "Hi, Sam here. How can I help?",
                                                                "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    console.cookies.clear()

    page = (await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={cursor}&wait=1")).json()
    assert page["responder"] == "human" and page["status"] == "idle"  # PAP-7.7-01
    state, message = page["events"][0], page["events"][1]
    assert state["type"] == "state" and state["responder"] == "human" and state["responder_name"] == "Sam"
    assert message["type"] == "message" and message["message"]["role"] == "company"
    assert message["message"]["sender"] == "human" and message["message"]["sender_name"] == "Sam"  # PAP-7.7-02
    assert message["message"]["text"] == "Hi, Sam here. How can I help?"
    assert tenant.email not in json.dumps(page)


async def test_retention_forgets_old_events_and_old_cursors_expire(
    desk: Desk, agent: TestAgent, console: AsyncTestClient[Any], issuer: Any, ledger: Any,  # noqa: F811
    other_tenant: TenantHandle, clock: ShiftableClock, store: Any, web: MockWeb, runtime: Runtime, db: Any,
) -> None:
    kept_desk = await make_desk(console, issuer, ledger, other_tenant, clock, store, web)
    await db.execute("UPDATE issuer_settings SET settings = jsonb_set(settings, '{conversations,retention_days}',"
                     " '90') WHERE tenant_id = $1", other_tenant.id)
    token = await _session(desk, agent, unique("usr_"))
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    events = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()["events"]
    assert len(events) >= 3
    other_agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    other_token = await _session(kept_desk, other_agent, unique("usr_"))
    other_cid = (await kept_desk.start(other_agent, other_token)).json()["conversation_id"]
    other_events = (await kept_desk.call(other_agent, other_token, "GET", f"/{other_cid}/events")).json()["events"]

    # Within 30 days (the default retention) nothing goes.
    await forget_expired(runtime.pool, clock() + timedelta(days=29))  # (other tests' tenants share the database)
    r = await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={events[0]['id']}")
    assert r.status_code == 200

    # Past 30 days: this tenant's old events go, in chunks of one; the 90-day tenant keeps its own.
    later = clock() + timedelta(days=31)
    forgotten = await forget_expired(runtime.pool, later, chunk=1)
    assert forgotten >= len(events) - 1  # the last event of a conversation is kept
    r = await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={events[0]['id']}")
    assert r.status_code == 410 and r.json()["error"] == "cursor_expired"  # PAP-7.5-04
    r = await desk.call(agent, token, "GET", f"/{cid}/events")
    assert r.status_code == 200 and [e["id"] for e in r.json()["events"]] == [events[-1]["id"]]
    r = await kept_desk.call(other_agent, other_token, "GET", f"/{other_cid}/events",
                             query=f"cursor={other_events[0]['id']}")
    assert r.status_code == 200 and r.json()["events"] == other_events[1:]
    tombstones = await db.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1"
                                   " AND conversation_id = $2 AND payload IS NULL AND forgotten_at IS NOT NULL",
                                   desk.company.tenant.id, cid)
    assert tombstones == len(events) - 1
    await forget_expired(runtime.pool, later)  # again: nothing more of this conversation goes
    assert await db.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1"
                             " AND conversation_id = $2 AND payload IS NOT NULL", desk.company.tenant.id, cid) == 1


async def test_messages_per_conversation_are_rate_limited(desk: Desk, agent: TestAgent) -> None:  # noqa: F811
    from frontdoor_ledger.http.agent_conversations import MESSAGES_PER_CONVERSATION_PER_MINUTE

    token = await _session(desk, agent, unique("usr_"))
    desk.support.reply = False
    await room_in_window(60, needed_s=15)  # the start and the limit+1 messages fall in one minute of the limit
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    statuses = []
    for _ in range(MESSAGES_PER_CONVERSATION_PER_MINUTE + 1):
        r = await desk.call(agent, token, "POST", f"/{cid}/messages",
                            {"message": {"id": unique("msg_"), "sender": "agent", "text": "Again"}})
        statuses.append(r.status_code)
    assert statuses == [202] * MESSAGES_PER_CONVERSATION_PER_MINUTE + [429], statuses
    assert r.json()["error"] == "rate_limited" and int(r.headers["retry-after"]) >= 1
    # Another conversation of the same Session is not held back by this one's limit.
    other = await desk.start(agent, token)
    assert other.status_code == 201
