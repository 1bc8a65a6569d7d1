"""The relay mode of hosted conversations on the wire: Frontdoor POSTs each agent message to the
company's own conversation endpoint (one of its webhook endpoints), signed with that endpoint's
secret (Standard Webhooks, checked here with the independent ``standardwebhooks`` package), and
records the replies in its answer as the company's messages, which agents read at the hosted
endpoint (PAP §7). The real issuer, console and ledger apps, PostgreSQL and Redis; the company's
endpoint is a handler on the pretend internet (`MockWeb`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import msgspec
import pytest
from frontdoor_core.settings import Settings
from frontdoor_sdk import WebhookVerifier
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER
from tests.integration.ledger.test_ledger_conversations import Desk, SupportAgent
from tests.integration.signin.conftest import make_company
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


class CompanyEndpoint:
    """The company's own conversation endpoint: checks each request's signature, answers as told."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.signed_now = True  # false: the test moved Frontdoor's clock, the timestamp is not the receiver's now
        self.answer: Callable[[dict[str, Any]], httpx.Response] = lambda payload: httpx.Response(
            200, json={"messages": [{"text": f"You said: {payload['data']['message']['text']}"}]})

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.signed_now:
            payload = Webhook(self.secret).verify(request.content, dict(request.headers))  # raises unless signed
            event = await WebhookVerifier(self.secret).verify(request.content, request.headers)  # the sdk's, too
            assert event.type == "conversation.relay" and event.id == request.headers["webhook-id"]
        else:
            payload = msgspec.json.decode(request.content)
        self.requests.append(payload)
        self.headers.append(dict(request.headers))
        return self.answer(payload)


async def _issuer_settings(console: AsyncTestClient[Any], t: TenantHandle, **conversations: Any) -> httpx.Response:
    current = (await console.get("/api/v1/issuer", headers=t.auth)).json()["settings"]
    current["conversations"] = {**current["conversations"], **conversations}
    return await console.put("/api/v1/issuer", json=current, headers=t.auth)


async def _relay_endpoint(console: AsyncTestClient[Any], t: TenantHandle, url: str) -> tuple[str, str]:
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={"url": url, "description": "relay"})
    assert r.status_code == 201, r.text
    return str(r.json()["endpoint"]["id"]), str(r.json()["secret"])


class RelayDesk(Desk):
    endpoint: CompanyEndpoint
    endpoint_id: str


async def make_relay_desk(console: Any, issuer: Any, ledger: Any, t: TenantHandle, clock: ShiftableClock,
                          store: Any, web: MockWeb) -> RelayDesk:
    company = await make_company(console, issuer, t, clock, store, conversations={"enabled": True})
    url = f"https://{t.slug}.support.example/pap/conversations"
    endpoint_id, secret = await _relay_endpoint(console, t, url)
    r = await _issuer_settings(console, t, relay_endpoint_id=endpoint_id)
    assert r.status_code == 200, r.text
    assert r.json()["settings"]["conversations"]["relay_endpoint_id"] == endpoint_id
    endpoint = CompanyEndpoint(secret)
    web.handle(url, endpoint)
    support = SupportAgent("whsec_unused", ledger, t.slug, company.credential)  # the API credential, for reads
    desk = RelayDesk(company, ledger, support)
    desk.endpoint, desk.endpoint_id = endpoint, endpoint_id
    return desk


@pytest.fixture
async def desk(console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
               web: MockWeb) -> RelayDesk:
    return await make_relay_desk(console, issuer, ledger, tenant, clock, store, web)


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def _token(desk: Desk, agent: TestAgent) -> str:
    return str((await desk.company.session(agent, unique("usr_")))["access_token"])


async def _events(desk: Desk, agent: TestAgent, token: str, cid: str, query: str = "") -> dict[str, Any]:
    r = await desk.call(agent, token, "GET", f"/{cid}/events", query=query)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _kinds(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["type"], (e.get("message") or {}).get("role"), e.get("status")) for e in events]


async def test_an_agent_message_is_relayed_signed_and_the_reply_is_read(desk: RelayDesk, agent: TestAgent,
                                                                        runtime: Any) -> None:
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Where is my order?", context={"locale": "en-GB"})
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "idle"  # the reply was recorded within the reply budget (PAP-7.7-01)
    cid = r.json()["conversation_id"]
    [relayed] = desk.endpoint.requests  # signature checked by the endpoint with its own secret
    assert relayed["type"] == "conversation.relay" and relayed["timestamp"].endswith("Z")
    data = relayed["data"]
    assert data["conversation_id"] == cid and data["message"]["text"] == "Where is my order?"
    assert data["message"]["role"] == "user" and data["message"]["context"] == {"locale": "en-GB"}
    relay_id = desk.endpoint.headers[0]["webhook-id"]  # the relay's webhook message, the same on every attempt
    assert relay_id.startswith("msg_")
    page = await _events(desk, agent, token, cid)
    assert _kinds(page["events"]) == [("message", "user", None), ("state", None, "working"),
                                      ("message", "company", None), ("state", None, "idle")]
    reply = page["events"][2]["message"]
    assert reply["text"] == "You said: Where is my order?" and reply["sender"] == "agent"  # PAP-7.7-02
    assert reply["id"] == f"re-{data['event_id']}-0"

    # The same message again is a retry (PAP-7.3-01): not relayed twice, nothing added.
    again = await desk.call(agent, token, "POST", f"/{cid}/messages", {"message": {
        "id": page["events"][0]["message"]["id"], "sender": "agent", "text": "Where is my order?",
        "context": {"locale": "en-GB"}}})
    assert again.status_code == 202, again.text
    assert len(desk.endpoint.requests) == 1
    async with runtime.pool.acquire() as conn:
        kept = await conn.fetchval("SELECT count(*) FROM conversation_events WHERE tenant_id = $1"
                                   " AND conversation_id = $2", desk.company.tenant.id, cid)
    assert kept == 4


async def test_several_replies_data_and_a_handoff_from_the_company(desk: RelayDesk, agent: TestAgent) -> None:
    desk.endpoint.answer = lambda payload: httpx.Response(200, json={
        "messages": [{"id": "first", "text": "One moment."}, {"data": {"tracking": "ZX1"}}], "handoff": True})
    token = await _token(desk, agent)
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    page = await _events(desk, agent, token, cid)
    messages = [e["message"] for e in page["events"] if e["type"] == "message" and e["message"]["role"] == "company"]
    assert [m.get("text") or m.get("data") for m in messages] == ["One moment.", {"tracking": "ZX1"}]
    assert messages[0]["id"] == "first"
    assert page["status"] == "queued"  # the company asked for a person: in the inbox
    r = await desk.api("GET", "?status=queued")
    assert cid in [c["conversation_id"] for c in r.json()["conversations"]]


async def test_no_relay_while_a_person_answers_and_again_once_handed_back(desk: RelayDesk,
                                                                          agent: TestAgent) -> None:
    token = await _token(desk, agent)
    cid = (await desk.start(agent, token)).json()["conversation_id"]
    r = await desk.call(agent, token, "POST", f"/{cid}/handoff")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    r = await desk.api("POST", f"/{cid}/responder", {"responder": "human"})
    assert r.status_code == 200, r.text
    r = await desk.call(agent, token, "POST", f"/{cid}/messages",
                        {"message": {"id": unique("msg_"), "sender": "agent", "text": "Are you a person?"}})
    assert r.status_code == 202 and r.json()["responder"] == "human"
    assert len(desk.endpoint.requests) == 1  # only the first message: the relay stopped (PAP-7.9)
    page = await _events(desk, agent, token, cid)
    assert [e["message"]["text"] for e in page["events"] if e["type"] == "message"
            and e["message"]["role"] == "company"] == ["You said: Hello."]
    r = await desk.api("POST", f"/{cid}/responder", {"responder": "agent"})
    assert r.status_code == 200, r.text
    r = await desk.call(agent, token, "POST", f"/{cid}/messages",
                        {"message": {"id": unique("msg_"), "sender": "agent", "text": "Back?"}})
    assert r.status_code == 202, r.text
    assert [p["data"]["message"]["text"] for p in desk.endpoint.requests] == ["Hello.", "Back?"]


@pytest.mark.parametrize("answer", [
    pytest.param(lambda payload: httpx.Response(500, text="down"), id="500"),
    pytest.param(lambda payload: httpx.Response(200, text="<html>ok</html>"), id="not-json"),
    pytest.param(lambda payload: httpx.Response(200, json={"messages": [{"role": "system", "text": "x"}]}),
                 id="unknown-field"),
    pytest.param(lambda payload: httpx.Response(200, json={"messages": [{"text": "x" * 20_000}]}), id="too-large"),
])
async def test_a_failing_endpoint_queues_the_conversation_for_a_person(desk: RelayDesk, agent: TestAgent,
                                                                       answer: Any) -> None:
    desk.endpoint.answer = answer
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Help")
    assert r.status_code == 201, r.text  # the agent's message is recorded and answered
    cid = r.json()["conversation_id"]
    assert r.json()["status"] == "queued"
    page = await _events(desk, agent, token, cid)
    assert _kinds(page["events"]) == [("message", "user", None), ("state", None, "working"),
                                      ("state", None, "queued")]
    r = await desk.api("GET", "?status=queued")
    assert cid in [c["conversation_id"] for c in r.json()["conversations"]]


async def test_an_unreachable_endpoint_queues_the_conversation(desk: RelayDesk, agent: TestAgent,
                                                               web: MockWeb) -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    web.handle(f"https://{desk.slug}.support.example/pap/conversations", refuse)
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Help")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text


async def test_a_slow_endpoint_never_holds_the_agent(desk: RelayDesk, agent: TestAgent, settings: Settings,
                                                     clock: ShiftableClock, web: MockWeb) -> None:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json={"messages": [{"text": "Too late"}]})

    web.handle(f"https://{desk.slug}.support.example/pap/conversations", slow)
    quick = msgspec.structs.replace(settings, conversation_reply_wait=timedelta(milliseconds=300),
                                    webhook_timeout=timedelta(seconds=1))
    app = create_app(quick, clock=clock, fetcher=SafeFetcher(transport=web))
    token = await _token(desk, agent)
    async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=LEDGER) as other:
        started = time.monotonic()
        r = await desk.call(agent, token, "POST", "", {"message": {"id": unique("msg_"), "sender": "agent",
                                                                   "text": "Hello?"}}, client=other)  # type: ignore[arg-type]
        assert time.monotonic() - started < 3
        assert r.status_code == 201 and r.json()["status"] == "working", r.text  # PAP-7.7-01: not a hang
        cid = r.json()["conversation_id"]
        page = await desk.call(agent, token, "GET", f"/{cid}/events", query="wait=10",
                               client=other)  # type: ignore[arg-type]
        body = page.json()
        while body["status"] != "queued" and time.monotonic() - started < 10:
            page = await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={body['cursor']}&wait=10",
                                   client=other)  # type: ignore[arg-type]
            body = page.json()
    assert body["status"] == "queued"  # the relay timed out: a person is asked for
    assert time.monotonic() - started < 10


async def test_the_relay_endpoint_is_checked_when_saved(console: Any, issuer: Any, tenant: TenantHandle,
                                                       other_tenant: TenantHandle, clock: ShiftableClock,
                                                       store: Any, runtime: Any) -> None:
    await make_company(console, issuer, tenant, clock, store, conversations={"enabled": True})
    r = await _issuer_settings(console, tenant, relay_endpoint_id="whe_nosuchendpoint")
    assert r.status_code == 422, r.text
    assert "conversations.relay_endpoint_id" in r.text
    theirs, _ = await _relay_endpoint(console, other_tenant, f"https://{other_tenant.slug}.example/relay")
    r = await _issuer_settings(console, tenant, relay_endpoint_id=theirs)
    assert r.status_code == 422 and "conversations.relay_endpoint_id" in r.text  # another tenant's: unknown
    r = await _issuer_settings(console, tenant, relay_endpoint_id="not an id")
    assert r.status_code == 422 and "conversations.relay_endpoint_id" in r.text
    # A private address is refused at registration ...
    r = await console.post("/api/v1/webhook-endpoints", headers=tenant.auth,
                           json={"url": "https://10.0.0.7/relay", "description": "relay"})
    assert r.status_code == 422 and r.json()["code"] == "url_not_public", r.text
    # ... and when the relay is configured, for an endpoint registered under an allowlist since narrowed.
    ours, _ = await _relay_endpoint(console, tenant, f"https://{tenant.slug}.example/relay")
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE webhook_endpoints SET url = 'https://10.0.0.7/relay' WHERE tenant_id = $1"
                           " AND id = $2", tenant.id, ours)
    r = await _issuer_settings(console, tenant, relay_endpoint_id=ours)
    assert r.status_code == 422, r.text
    assert "not a public address" in r.json()["errors"]["conversations.relay_endpoint_id"]
    stored = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]["conversations"]
    assert stored["relay_endpoint_id"] is None


async def test_a_deleted_relay_endpoint_queues_the_conversation(desk: RelayDesk, agent: TestAgent,
                                                                console: Any, tenant: TenantHandle) -> None:
    r = await console.delete(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)
    assert r.status_code == 204, r.text
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Anyone?")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    assert desk.endpoint.requests == []


async def test_a_secret_that_does_not_decrypt_queues_the_conversation(desk: RelayDesk, agent: TestAgent,
                                                                      runtime: Any) -> None:
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE webhook_secrets SET secret_ciphertext = $3 WHERE tenant_id = $1"
                           " AND endpoint_id = $2", desk.company.tenant.id, desk.endpoint_id, b"\x00not a blob")
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Anyone?")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text  # never signed with nothing
    assert desk.endpoint.requests == []


async def test_the_inbox_says_the_relay_is_on_and_lists_a_failed_relay(desk: RelayDesk, agent: TestAgent,
                                                                       console: Any, tenant: TenantHandle) -> None:
    from tests.integration.console.test_dashboard import sign_in

    desk.endpoint.answer = lambda payload: httpx.Response(503)
    token = await _token(desk, agent)
    cid = (await desk.start(agent, token, "Help")).json()["conversation_id"]
    await sign_in(console, tenant.email)
    page = await console.get("/conversations")
    assert page.status_code == 200
    assert 'id="conversations-relay"' in page.text
    assert f"<code>https://{tenant.slug}.support.example/pap/conversations</code>" in page.text
    assert cid in page.text  # waiting for a person
    r = await console.delete(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)
    assert r.status_code == 204, r.text
    page = await console.get("/conversations")
    assert "no longer exists" in page.text


async def test_the_endpoint_rate_limit_paces_relay_requests(desk: RelayDesk, agent: TestAgent, console: Any,
                                                            tenant: TenantHandle) -> None:
    r = await console.post(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth,
                            json={"rate_limit_per_second": 1})
    assert r.status_code == 200, r.text
    arrivals: list[float] = []
    answer = desk.endpoint.answer

    def timed(payload: dict[str, Any]) -> httpx.Response:
        arrivals.append(time.monotonic())
        return answer(payload)

    desk.endpoint.answer = timed
    token = await _token(desk, agent)
    for text in ("one", "two", "three"):
        r = await desk.start(agent, token, text)
        assert r.status_code == 201 and r.json()["status"] == "idle", r.text  # each answered, in turn
    assert len(arrivals) == 3
    assert arrivals[2] - arrivals[0] > 1.0  # three sends at 1/s span two window boundaries


async def test_a_disabled_relay_endpoint_queues_the_conversation(desk: RelayDesk, agent: TestAgent, console: Any,
                                                                 tenant: TenantHandle) -> None:
    r = await console.post(f"/api/v1/webhook-endpoints/{desk.endpoint_id}/disable", headers=tenant.auth, json={})
    assert r.status_code == 200, r.text
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Anyone?")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    assert desk.endpoint.requests == []


async def _relay_messages(console: Any, t: TenantHandle, endpoint_id: str) -> list[dict[str, Any]]:
    r = await console.get(f"/api/v1/webhook-endpoints/{endpoint_id}/messages", headers=t.auth)
    assert r.status_code == 200, r.text
    return [m for m in r.json()["data"] if m["purpose"] == "relay"]


async def test_each_relay_is_a_message_of_its_endpoint_with_its_attempts(desk: RelayDesk, agent: TestAgent,
                                                                         console: Any, tenant: TenantHandle) -> None:
    token = await _token(desk, agent)
    ok = (await desk.start(agent, token, "Hello?")).json()["conversation_id"]
    desk.endpoint.answer = lambda payload: httpx.Response(503, text="busy")
    failed = (await desk.start(agent, token, "Anyone?")).json()["conversation_id"]
    relays = await _relay_messages(console, tenant, desk.endpoint_id)
    assert [(m["event_type"], m["state"], m["last_status"]) for m in reversed(relays)] == [
        ("conversation.relay", "delivered", 200), ("conversation.relay", "exhausted", 503)]  # one attempt each
    assert [h["webhook-id"] for h in desk.endpoint.headers] == [m["id"] for m in reversed(relays)]
    for relay, cid, status in zip(reversed(relays), (ok, failed), (200, 503), strict=True):
        r = await console.get(f"/api/v1/webhook-messages/{relay['id']}", headers=tenant.auth)
        assert r.status_code == 200, r.text
        body = msgspec.json.decode(r.json()["message"]["body"])
        assert body["type"] == "conversation.relay" and body["data"]["conversation_id"] == cid
        [attempt] = r.json()["attempts"]
        assert attempt["response_status"] == status and attempt["endpoint_id"] == desk.endpoint_id
        assert attempt["request_headers"]["webhook-signature"] == "[redacted]"  # never the signature
    assert (await console.get(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)
            ).json()["failing_since"] is not None  # the failed relay started the endpoint's failure streak


async def test_relay_failures_disable_the_endpoint_as_delivery_failures_do(desk: RelayDesk, agent: TestAgent,
                                                                           console: Any, tenant: TenantHandle,
                                                                           clock: ShiftableClock,
                                                                           settings: Settings) -> None:
    desk.endpoint.answer = lambda payload: httpx.Response(500)
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "First")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    endpoint = (await console.get(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)).json()
    assert endpoint["enabled"] is True and endpoint["failing_since"] is not None
    clock.advance(seconds=settings.webhook_disable_after.total_seconds() + 60)  # failing for too long
    desk.endpoint.signed_now = False
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Second")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    endpoint = (await console.get(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)).json()
    assert (endpoint["enabled"], endpoint["disabled_reason"]) == (False, "failing")
    # Disabled: the next message is queued for a person without a request.
    r = await desk.start(agent, token, "Third")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    assert [p["data"]["message"]["text"] for p in desk.endpoint.requests] == ["First", "Second"]


async def test_a_gone_relay_endpoint_is_disabled_at_once(desk: RelayDesk, agent: TestAgent, console: Any,
                                                         tenant: TenantHandle, runtime: Any) -> None:
    desk.endpoint.answer = lambda payload: httpx.Response(410)
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    endpoint = (await console.get(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth)).json()
    assert (endpoint["enabled"], endpoint["disabled_reason"]) == (False, "gone")
    async with runtime.pool.acquire() as conn:  # audited as any automatic disabling
        assert await conn.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = $2"
                                   " AND target_id = $3", tenant.id, "webhook_endpoint.disabled", desk.endpoint_id) == 1


async def test_a_relay_answer_may_ask_for_sign_in_and_stream_its_text(desk: RelayDesk, agent: TestAgent,
                                                                      runtime: Any) -> None:
    from frontdoor_conversations import recent_deltas

    desk.endpoint.answer = lambda payload: httpx.Response(200, json={
        "messages": [{"id": "ask-1", "text": "Please sign in to see your orders."}],
        "events": [{"type": "text-delta", "message_id": "ask-1", "text": "Please sign in"},
                   {"type": "authorization", "scope": "orders:read"},
                   {"type": "authorization", "scope": "orders:write", "error": "insufficient_scope"}]})
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Where is my order?")
    assert r.status_code == 201 and r.json()["status"] == "idle", r.text
    page = await _events(desk, agent, token, r.json()["conversation_id"])
    # PAP-7.11-01: the authorization events, then the message that asks; recorded as the company's.
    assert [(e["type"], e.get("scope"), e.get("error")) for e in page["events"][2:4]] == [
        ("authorization", "orders:read", "sign_in_required"), ("authorization", "orders:write", "insufficient_scope")]
    assert _kinds(page["events"][4:]) == [("message", "company", None), ("state", None, "idle")]
    assert page["events"][4]["message"]["id"] == "ask-1"
    # §7.6: the delta is display only: shown to streaming readers, never in the event log (PAP-7.6-01).
    assert "text-delta" not in {e["type"] for e in page["events"]}
    assert await recent_deltas(runtime.redis, desk.company.tenant.id, "ask-1") == [
        {"message_id": "ask-1", "text": "Please sign in"}]


@pytest.mark.parametrize("event", [
    pytest.param({"type": "authorization", "scope": " "}, id="blank-scope"),
    pytest.param({"type": "authorization", "scope": "orders:read", "error": "invalid_token"}, id="unknown-error"),
    pytest.param({"type": "text-delta", "message_id": "ask-1", "text": "x" * 4001}, id="long-delta"),
    pytest.param({"type": "state", "status": "closed"}, id="state"),
])
async def test_a_relay_answer_with_an_event_the_rules_refuse_is_a_failure(desk: RelayDesk, agent: TestAgent,
                                                                          console: Any, tenant: TenantHandle,
                                                                          event: dict[str, Any]) -> None:
    await _refused_answer(desk, agent, console, tenant, event)


async def _refused_answer(desk: RelayDesk, agent: TestAgent, console: Any, tenant: TenantHandle,
                          event: dict[str, Any]) -> None:
    """The endpoint answers a message and ``event``, which the rules refuse: the attempt fails as invalid."""
    desk.endpoint.answer = lambda payload: httpx.Response(200, json={"messages": [{"text": "Hi"}], "events": [event]})
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text  # nothing of the answer recorded
    page = await _events(desk, agent, token, r.json()["conversation_id"])
    assert _kinds(page["events"]) == [("message", "user", None), ("state", None, "working"),
                                      ("state", None, "queued")]
    [relay] = await _relay_messages(console, tenant, desk.endpoint_id)
    r = await console.get(f"/api/v1/webhook-messages/{relay['id']}", headers=tenant.auth)
    assert [a["error_class"] for a in r.json()["attempts"]] == ["invalid_response"]


class _NoTurn:
    """A rate window that never has a turn (as an endpoint's limit taken by its other deliveries)."""

    async def wait(self, endpoint_id: str, per_second: int) -> float:
        return 3600.0


async def test_a_relay_with_no_turn_in_its_endpoints_rate_limit_is_left_to_a_deliverer(
        desk: RelayDesk, agent: TestAgent, console: Any, tenant: TenantHandle, ledger: Any, runtime: Any,
        web: MockWeb, kek_value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_dispatcher.deliverer import Deliverer
    from frontdoor_tenancy.credentials import Kek
    from frontdoor_webhooks.sender import SafeSender

    from tests.integration.dispatcher.test_deliverer import POLICY, _TenantsLanes, running
    from tests.support.eventually import eventually

    r = await console.post(f"/api/v1/webhook-endpoints/{desk.endpoint_id}", headers=tenant.auth,
                           json={"rate_limit_per_second": 1})
    assert r.status_code == 200, r.text
    monkeypatch.setattr(ledger.app.state.conversations, "_throttle", _NoTurn())
    token = await _token(desk, agent)
    r = await desk.start(agent, token, "Hello?")
    assert r.status_code == 201 and r.json()["status"] == "working", r.text  # not relayed now ...
    cid = r.json()["conversation_id"]
    assert desk.endpoint.requests == []
    [relay] = await _relay_messages(console, tenant, desk.endpoint_id)
    async with runtime.pool.acquire() as conn:  # ... handed back unused: due now, for any deliverer
        row = await conn.fetchrow("SELECT state, attempts, locked_until FROM webhook_messages WHERE tenant_id = $1"
                                  " AND id = $2", tenant.id, relay["id"])
    assert (row["state"], row["attempts"], row["locked_until"]) == ("pending", 0, None)
    deliverer = Deliverer(runtime.settings.database_url, runtime.pool, sender=SafeSender(SafeFetcher(transport=web)),
                          kek=Kek.from_env_value(kek_value), policy=POLICY, clock=runtime.clock, idle_wake=0.2,
                          lanes=_TenantsLanes({tenant.id}))
    async with running(deliverer):
        async def answered() -> None:
            assert (await _events(desk, agent, token, cid))["status"] == "idle"

        await eventually(answered, timeout=20)
    page = await _events(desk, agent, token, cid)
    assert [e["message"]["text"] for e in page["events"] if e["type"] == "message"] == ["Hello?", "You said: Hello?"]
    assert [p["data"]["message"]["text"] for p in desk.endpoint.requests] == ["Hello?"]
