"""Hosted conversations (PAP §7) on the wire: agents with DPoP Session Tokens from the real issuer,
the company's support agent as a signed webhook receiver replying through the ledger API, the
real ledger app(s), PostgreSQL and Redis. Each rule asserts status, ``error`` and what was kept."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER
from tests.integration.signin.conftest import Company, make_company
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


class SupportAgent:
    """The company's agent: verifies each delivery, replies through the ledger API unless told to wait."""

    def __init__(self, secret: str, ledger: AsyncTestClient[Any], slug: str, credential: str) -> None:
        self.secret, self.ledger, self.slug = secret, ledger, slug
        self.auth = {"Authorization": f"Bearer {credential}"}
        self.deliveries: list[dict[str, Any]] = []
        self.reply = True

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        payload = Webhook(self.secret).verify(request.content, dict(request.headers))
        self.deliveries.append(payload)
        if self.reply:
            data = payload["data"]
            # Over its own connection, as a company's server calls the ledger while answering.
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.ledger.app), base_url=LEDGER) as h:
                r = await h.post(f"/{self.slug}/v1/conversations/{data['conversation_id']}/messages",
                                 json={"message": {"id": "re_" + data["event_id"], "text": "Hello!"}},
                                 headers=self.auth)
            assert r.status_code == 201, r.text
        return httpx.Response(204)


class Desk:
    """A tenant with hosted conversations on, and its support agent."""

    def __init__(self, company: Company, ledger: AsyncTestClient[Any], support: SupportAgent) -> None:
        self.company, self.ledger, self.support = company, ledger, support

    @property
    def slug(self) -> str:
        return self.company.tenant.slug

    def url(self, path: str = "") -> str:
        return f"{LEDGER}/{self.slug}/conversations{path}"

    async def call(self, agent: TestAgent, token: str, method: str, path: str = "", body: Any = None, *,
                   query: str = "", headers: dict[str, str] | None = None,
                   client: AsyncTestClient[Any] | None = None) -> httpx.Response:
        url = self.url(path)
        auth = {"Authorization": f"DPoP {token}", "DPoP": agent.dpop(method, url, token=token,
                                                                      iat=self.company.now()), **(headers or {})}
        http = client or self.ledger
        target = url + (f"?{query}" if query else "")
        if method == "GET":
            return await http.get(target, headers=auth)
        return await http.post(target, content=json.dumps(body if body is not None else {}).encode(),
                               headers={**auth, "Content-Type": "application/json"})

    async def start(self, agent: TestAgent, token: str, text: str = "Hello.", **message: Any) -> httpx.Response:
        return await self.call(agent, token, "POST", "", {"message": {"id": unique("msg_"), "sender": "agent",
                                                                     "text": text, **message}})

    def api(self, method: str, path: str, body: Any = None, *, credential: str | None = None) -> Any:
        auth = {"Authorization": f"Bearer {credential}"} if credential else self.support.auth
        url = f"/{self.slug}/v1/conversations{path}"
        return self.ledger.get(url, headers=auth) if method == "GET" else self.ledger.post(url, json=body or {},
                                                                                          headers=auth)


async def make_desk(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],
                    t: TenantHandle, clock: ShiftableClock, store: Any, web: MockWeb) -> Desk:
    company = await make_company(console, issuer, t, clock, store, conversations={"enabled": True})
    hook = f"https://{t.slug}.support.example/webhooks/conversations"
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": hook, "description": "support agent", "event_types": ["conversation.message.created"]})
    assert r.status_code == 201, r.text
    support = SupportAgent(r.json()["secret"], ledger, t.slug, company.credential)
    web.handle(hook, support)
    return Desk(company, ledger, support)


@pytest.fixture
async def desk(console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
               web: MockWeb) -> Desk:
    return await make_desk(console, issuer, ledger, tenant, clock, store, web)


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def _session(desk: Desk, agent: TestAgent, user: str) -> str:
    return str((await desk.company.session(agent, user))["access_token"])


async def test_start_delivers_the_webhook_and_the_reply_is_read(desk: Desk, agent: TestAgent, runtime: Any) -> None:
    user = unique("usr_")
    token = await _session(desk, agent, user)
    r = await desk.start(agent, token, "Where is my order?", context={"locale": "en-GB"})
    assert r.status_code == 201, r.text
    receipt = r.json()
    assert receipt["status"] == "idle" and receipt["responder"] == "agent"  # PAP-7.7-01: replied already
    conversation = receipt["conversation_id"]
    [delivery] = desk.support.deliveries
    assert delivery["type"] == "conversation.message.created"
    data = delivery["data"]
    assert data["conversation_id"] == conversation and data["user_id"] == user and data["account"] is None
    assert data["message"]["text"] == "Where is my order?" and data["message"]["role"] == "user"
    assert data["message"]["context"] == {"locale": "en-GB"} and data["scopes"] == []
    page = (await desk.call(agent, token, "GET", f"/{conversation}/events")).json()
    assert set(page) == {"conversation_id", "events", "cursor", "has_more", "status", "responder"}  # PAP-7.5-03
    kinds = [(e["type"], (e.get("message") or {}).get("role"), e.get("status")) for e in page["events"]]
    assert kinds == [("message", "user", None), ("state", None, "working"), ("message", "company", None),
                     ("state", None, "idle")]
    assert page["events"][2]["message"]["sender"] == "agent"  # PAP-7.7-02
    async with runtime.pool.acquire() as conn:
        kept = await conn.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1"
                                   " AND conversation_id = $2", desk.company.tenant.id, conversation)
    assert kept == 4


async def test_message_ids_replay_and_conflict(desk: Desk, agent: TestAgent) -> None:
    token = await _session(desk, agent, unique("usr_"))
    body = {"message": {"id": unique("msg_"), "sender": "human", "text": "My words"}}
    first = await desk.call(agent, token, "POST", "", body)
    again = await desk.call(agent, token, "POST", "", body)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json()["conversation_id"] == first.json()["conversation_id"]
    assert len(desk.support.deliveries) == 1  # PAP-7.3-01: a retry adds nothing
    changed = {"message": {**body["message"], "text": "Other words"}}
    r = await desk.call(agent, token, "POST", "", changed)
    assert r.status_code == 409 and r.json()["error"] == "message_id_conflict"
    cid = first.json()["conversation_id"]
    r = await desk.call(agent, token, "POST", f"/{cid}/messages", changed)
    assert r.status_code == 409 and r.json()["error"] == "message_id_conflict"


async def test_invalid_and_expired_cursors(desk: Desk, agent: TestAgent) -> None:
    token = await _session(desk, agent, unique("usr_"))
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    events = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()["events"]
    r = await desk.call(agent, token, "GET", f"/{cid}/events", query="cursor=evt_never_issued")
    assert r.status_code == 400 and r.json()["error"] == "invalid_cursor"
    r = await desk.api("POST", f"/{cid}/forget-events", {"keep_last": 1})
    assert r.status_code == 200 and r.json()["forgotten"] == 3
    r = await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={events[0]['id']}")
    assert r.status_code == 410 and r.json()["error"] == "cursor_expired"  # PAP-7.5-04
    kept = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()
    assert [e["id"] for e in kept["events"]] == [events[-1]["id"]]
    empty = (await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={events[-1]['id']}")).json()
    assert empty["events"] == [] and empty["cursor"] == events[-1]["id"] and empty["has_more"] is False


async def test_long_poll_is_woken_from_another_ledger_process(desk: Desk, agent: TestAgent, settings: Settings,
                                                              clock: ShiftableClock, web: MockWeb) -> None:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    token = await _session(desk, agent, unique("usr_"))
    desk.support.reply = False  # a slow company agent: no reply while the webhook is answered
    r = await desk.start(agent, token)
    assert r.status_code == 201 and r.json()["status"] == "working"
    cid = r.json()["conversation_id"]
    cursor = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()["cursor"]
    # Two ledger processes in this event loop: the agent long-polls one, the company answers at the other.
    one = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    two = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with one.lifespan(), two.lifespan(), \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=one), base_url=LEDGER) as first, \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=two), base_url=LEDGER) as second:
        started = time.monotonic()
        poll = asyncio.create_task(desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={cursor}&wait=20",
                                             client=first))  # type: ignore[arg-type]
        await asyncio.sleep(0.5)
        assert not poll.done()  # it waits: nothing new yet
        reply = await second.post(f"/{desk.slug}/v1/conversations/{cid}/messages", headers=desk.support.auth,
                                  json={"message": {"text": "Sorry for the wait."}, "sender": "human"})
        assert reply.status_code == 201, reply.text
        page = (await asyncio.wait_for(poll, 10)).json()
        assert time.monotonic() - started < 8  # woken through Redis, not at the end of the wait
    texts = [e["message"]["text"] for e in page["events"] if e["type"] == "message"]
    assert texts == ["Sorry for the wait."] and page["events"][0]["message"]["sender"] == "human"


async def test_an_accounts_conversation_refuses_signed_out_and_other_accounts(desk: Desk, agent: TestAgent) -> None:
    user = unique("usr_")
    signed = await desk.company.sign_in(agent, user, "acct_ada")
    r = await desk.start(agent, signed["access_token"])
    cid = r.json()["conversation_id"]
    assert desk.support.deliveries[-1]["data"]["account"] == "acct_ada"
    signed_out = await _session(desk, agent, user)  # the same user, another Session, not signed in
    r = await desk.call(agent, signed_out, "GET", f"/{cid}/events")
    assert r.status_code == 403 and r.json()["error"] == "sign_in_required"
    grace = await desk.company.sign_in(agent, user, "acct_grace")
    r = await desk.call(agent, grace["access_token"], "GET", f"/{cid}/events")
    assert r.status_code == 404 and r.json()["error"] == "conversation_not_found"
    stranger = await _session(desk, agent, unique("usr_"))
    unknown = await desk.call(agent, stranger, "GET", "/cnv_unknown_0000/events")
    theirs = await desk.call(agent, stranger, "GET", f"/{cid}/events")
    assert (theirs.status_code, theirs.json()) == (unknown.status_code, unknown.json())  # GUIDE-co-errors-01


async def test_handoff_take_over_close(desk: Desk, agent: TestAgent) -> None:
    token = await _session(desk, agent, unique("usr_"))
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    r = await desk.call(agent, token, "POST", f"/{cid}/handoff")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    queued = (await desk.api("GET", "?status=queued")).json()["conversations"]
    assert cid in {c["conversation_id"] for c in queued}
    r = await desk.api("POST", f"/{cid}/responder", {"responder": "human"})
    assert r.status_code == 200 and r.json()["conversation"]["responder"] == "human"
    page = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()
    assert page["events"][-1] == {**page["events"][-1], "type": "state", "status": "idle", "responder": "human"}
    r = await desk.call(agent, token, "POST", f"/{cid}/close")
    assert r.status_code == 200 and r.json()["status"] == "closed"
    r = await desk.start(agent, token)  # a new conversation is fine; this one is closed:
    r = await desk.call(agent, token, "POST", f"/{cid}/messages",
                        {"message": {"id": unique("msg_"), "sender": "agent", "text": "Still there?"}})
    assert r.status_code == 409 and r.json()["error"] == "conversation_closed"
    r = await desk.api("POST", f"/{cid}/messages", {"message": {"text": "Late"}})
    assert r.status_code == 409 and r.json()["code"] == "conversation_closed"


async def test_direct_conversation_holds_its_parent(desk: Desk, agent: TestAgent) -> None:
    token = await _session(desk, agent, unique("usr_"))
    parent = (await desk.start(agent, token)).json()["conversation_id"]
    r = await desk.call(agent, token, "POST", "", {"parent_conversation_id": parent,
                                                   "message": {"id": unique("msg_"), "sender": "human", "text": "Me"}})
    assert r.status_code == 201
    direct = r.json()["conversation_id"]
    r = await desk.call(agent, token, "POST", f"/{parent}/messages",
                        {"message": {"id": unique("msg_"), "sender": "agent", "text": "Meanwhile"}})
    assert r.status_code == 409 and r.json() == {**r.json(), "error": "direct_conversation_open",
                                                 "conversation_id": direct}
    r = await desk.call(agent, token, "POST", "", {"parent_conversation_id": direct,
                                                   "message": {"id": unique("msg_"), "sender": "human", "text": "x"}})
    assert r.status_code == 404 and r.json()["error"] == "conversation_not_found"  # PAP-7.10-01
    assert (await desk.call(agent, token, "POST", f"/{direct}/close")).status_code == 200
    types = [e["type"] for e in (await desk.call(agent, token, "GET", f"/{parent}/events")).json()["events"]]
    assert "direct_opened" in types and types[-1] == "direct_closed"


async def test_sse_resumes_after_last_event_id_with_deltas(desk: Desk, agent: TestAgent) -> None:
    token = await _session(desk, agent, unique("usr_"))
    desk.support.reply = False
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    await desk.api("POST", f"/{cid}/deltas", {"message_id": "msg_r1", "text": "Hel"})
    await desk.api("POST", f"/{cid}/messages", {"message": {"id": "msg_r1", "text": "Hello"}})
    await desk.call(agent, token, "POST", f"/{cid}/close")  # the stream ends at the closed state event
    everything = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()["events"]
    first = everything[0]["id"]
    r = await desk.call(agent, token, "GET", f"/{cid}/events", headers={"Accept": "text/event-stream",
                                                                       "Last-Event-ID": first})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    ids = [line[4:] for line in r.text.splitlines() if line.startswith("id: ")]
    assert ids == [e["id"] for e in everything[1:]]  # right after Last-Event-ID
    assert 'event: text-delta\ndata: {"message_id":"msg_r1","text":"Hel"}' in r.text
    assert r.text.index("event: text-delta") < r.text.index('"text":"Hello"')  # pieces before the message


async def test_limits_message_size(desk: Desk, agent: TestAgent) -> None:
    token = await _session(desk, agent, unique("usr_"))
    r = await desk.start(agent, token, "x" * 17_000)
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"
    r = await desk.call(agent, token, "POST", "", {"message": {"id": unique("msg_"), "sender": "agent"}})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"  # PAP-7.4-01


async def test_two_tenants_are_isolated(desk: Desk, agent: TestAgent, console: Any, issuer: Any, ledger: Any,
                                        other_tenant: TenantHandle, clock: ShiftableClock, store: Any,
                                        web: MockWeb) -> None:
    b = await make_desk(console, issuer, ledger, other_tenant, clock, store, web)
    user = unique("usr_")
    token = await _session(desk, agent, user)
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    # B's company cannot list, read, answer, close or forget A's conversation.
    assert cid not in {c["conversation_id"] for c in (await b.api("GET", "")).json()["conversations"]}
    for method, path, body in (("GET", f"/{cid}", None), ("POST", f"/{cid}/messages", {"message": {"text": "x"}}),
                               ("POST", f"/{cid}/close", None), ("POST", f"/{cid}/forget-events", {}),
                               ("POST", f"/{cid}/responder", {"responder": "human"})):
        r = await b.api(method, path, body)
        assert r.status_code == 404 and r.json()["code"] == "conversation_not_found", (path, r.text)
    # A's credential at B's path is refused; A's conversation is unknown at B's endpoint.
    r = await b.api("GET", "", credential=desk.company.credential)
    assert r.status_code == 401
    b_token = await _session(b, agent, user)
    r = await b.call(agent, b_token, "GET", f"/{cid}/events")
    assert r.status_code == 404 and r.json()["error"] == "conversation_not_found"
    # A's Session Token is not accepted at B's endpoint.
    r = await b.call(agent, token, "GET", f"/{cid}/events")
    assert r.status_code == 401
    page = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()
    assert page["status"] == "idle" and len(page["events"]) == 4  # untouched


async def test_a_tenant_without_hosted_conversations_has_no_endpoint(console: Any, issuer: Any, ledger: Any,
                                                                     other_tenant: TenantHandle, clock: ShiftableClock,
                                                                     store: Any, agent: TestAgent) -> None:
    company = await make_company(console, issuer, other_tenant, clock, store)
    token = (await company.session(agent, unique("usr_")))["access_token"]
    url = f"{LEDGER}/{other_tenant.slug}/conversations"
    r = await ledger.post(url, content=b'{"message":{"id":"m1","sender":"agent","text":"Hi"}}',
                          headers={"Authorization": f"DPoP {token}", "Content-Type": "application/json",
                                   "DPoP": agent.dpop("POST", url, token=token, iat=company.now())})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
