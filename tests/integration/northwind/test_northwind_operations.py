"""Northwind's operations: proposals through the sdk's ledger client, the operation page, the perform webhook.

In-process against a fake issuer (tokens, introspection, browser join) and a fake ledger
(tests/integration/northwind/fake_ledger.py), both behind one httpx.MockTransport. Webhook
deliveries are signed with the independent ``standardwebhooks`` package.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from litestar import Litestar
from northwind import NorthwindConfig, create_app, performer_of
from standardwebhooks import Webhook

from tests.integration.northwind.fake_frontdoor import (
    CLIENT_ID,
    CREDENTIAL,
    ISSUER,
    MCP_URL,
    NOW,
    PUBLIC_URL,
    Agent,
    SessionState,
)
from tests.integration.northwind.fake_ledger import LEDGER, OPERATIONS, FakeLedger
from tests.integration.northwind.test_browser_join import BrowserFrontdoor, join, new_session
from tests.integration.northwind.test_northwind import MCP_HEADERS, POPPY, McpClient

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
ORDERS = f"{PUBLIC_URL}/api/orders"
REORDER = f"{PUBLIC_URL}/api/orders/reorder"
#: The conformance scenario's proposals (docs/example-company.md).
PROPOSALS: dict[str, tuple[str, dict[str, Any]]] = {
    "user": (REORDER, {}),
    "standing": (ORDERS, {"items": [{"sku": "NW-CHAI", "quantity": 2}]}),
    "fails": (ORDERS, {"items": [{"sku": "NW-SYRUP", "quantity": 1}, {"sku": "NW-CHANG", "quantity": 1}]}),
    "unknown": (ORDERS, {"items": [{"sku": "NW-CAJUN", "quantity": 1}]}),
}


@dataclass
class World:
    frontdoor: BrowserFrontdoor
    ledger: FakeLedger
    app: Litestar
    client: httpx.AsyncClient
    agent: Agent

    def ada(self, *, resource: str | None = None) -> str:
        return self.frontdoor.session_token(self.agent, resource=resource, signed_in=True, account="acct_ada",
                                            scope="orders:read")

    async def call(self, url: str, body: Any, token: str) -> httpx.Response:
        return await self.client.post(url, json=body, headers=self.agent.auth("POST", url, token))

    async def propose(self, kind: str, token: str | None = None) -> dict[str, Any]:
        url, body = PROPOSALS[kind]
        response = await self.call(url, body, token or self.ada())
        assert response.status_code == 202, response.text
        operation: dict[str, Any] = response.json()["operation"]
        return operation

    async def deliver(self, operation_id: str, *, msg_id: str | None = None, secret: str = SECRET,
                      key: str | None = None) -> httpx.Response:
        """An ``operation.perform`` delivery for the operation as the fake ledger holds it, now confirmed."""
        operation = {**self.ledger.operations[operation_id], "state": "in_progress"}
        details = self.ledger.details[operation_id]
        payload = json.dumps({"type": "operation.perform", "timestamp": "2026-09-21T11:50:00Z", "data": {
            "idempotency_key": key or operation_id, "operation": operation, "kind": details["kind"],
            "account": details["account"], "client_id": details["client_id"], "user_id": details["user_id"],
            "input": details["input"]}})
        msg_id = msg_id or f"msg_{operation_id}"
        signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(NOW, UTC), payload)
        return await self.client.post("/webhooks/frontdoor", content=payload, headers={
            "webhook-id": msg_id, "webhook-timestamp": str(NOW), "webhook-signature": signature,
            "content-type": "application/json"})


@asynccontextmanager
async def world(*, ledger_url: str | None = LEDGER, webhook_secret: str | None = SECRET,
                expose_test_hooks: bool = False) -> AsyncIterator[World]:
    frontdoor = BrowserFrontdoor()
    ledger = FakeLedger(frontdoor)

    def route(request: httpx.Request) -> httpx.Response:
        return ledger.handle(request) if ledger.handles(request) else frontdoor._browser(request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(route)) as to_frontdoor:
        app = create_app(NorthwindConfig(
            issuer=ISSUER, credential=CREDENTIAL, public_url=PUBLIC_URL, poppy=POPPY, http_client=to_frontdoor,
            clock=lambda: datetime.fromtimestamp(NOW, UTC), ledger_url=ledger_url, webhook_secret=webhook_secret,
            expose_test_hooks=expose_test_hooks,
        ))
        async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=PUBLIC_URL) as c:
            yield World(frontdoor, ledger, app, c, Agent())


def proposals(w: World) -> list[dict[str, Any]]:
    return [body for method, path, body in w.ledger.requests if (method, path) == ("POST", OPERATIONS)]


# --- proposing -------------------------------------------------------------------------------


async def test_the_four_proposals_answer_202_with_an_operation() -> None:
    async with world() as w:
        token = w.ada()
        user, standing, fails, unknown = [await w.propose(kind, token) for kind in PROPOSALS]
    assert [op["state"] for op in (user, standing, fails, unknown)] == ["proposed"] * 4
    assert user["user_approval_required"] is True
    assert user["terms"]["reorder_of"] == "ord_10391" and user["terms"]["total"] == {"amount": "38.00",
                                                                                     "currency": "EUR"}
    assert "Reorder ord_10391" in user["summary"] and "38.00 EUR" in user["summary"]
    assert standing["user_approval_required"] is False
    assert standing["terms"]["total"] == {"amount": "36.00", "currency": "EUR"}
    assert standing["terms"]["items"] == [{"sku": "NW-CHAI", "name": "Chai", "quantity": 2, "unit_price": "18.00"}]
    assert user["url"] == f"{PUBLIC_URL}/operations/{user['operation_id']}"
    sent = proposals(w)
    assert {body["kind"] for body in sent} == {"order.place"}
    assert sent[0]["caller"]["client_id"] == CLIENT_ID and sent[0]["caller"]["session_id"].startswith("ses_")
    assert sent[0]["url"] == f"{PUBLIC_URL}/operations/{{operation_id}}"
    assert sent[0]["action_key"] == "reorder:ord_10391" and sent[1]["action_key"].startswith("order:")
    assert sent[1]["input"] == {"items": [{"sku": "NW-CHAI", "quantity": 2}]}


async def test_a_large_new_order_needs_the_users_own_approval() -> None:
    async with world() as w:
        response = await w.call(ORDERS, {"items": [{"sku": "NW-GNOCCHI", "quantity": 2}]}, w.ada())
    assert response.status_code == 202 and response.json()["operation"]["user_approval_required"] is True


async def test_the_same_order_is_the_same_action_whatever_the_item_order() -> None:
    async with world() as w:
        token = w.ada()
        a = await w.call(ORDERS, {"items": [{"sku": "NW-CHAI", "quantity": 1}, {"sku": "NW-SYRUP", "quantity": 1},
                                            {"sku": "NW-CHAI", "quantity": 1}]}, token)
        b = await w.call(ORDERS, {"items": [{"sku": "NW-SYRUP", "quantity": 1}, {"sku": "NW-CHAI", "quantity": 2}]},
                         token)
    assert a.json() == b.json()
    assert len(w.ledger.operations) == 1


async def test_signed_out_is_sign_in_required_and_nothing_is_proposed() -> None:
    async with world() as w:
        token = w.frontdoor.session_token(w.agent)
        for url, body in PROPOSALS.values():
            response = await w.call(url, body, token)
            assert response.status_code == 403 and response.json()["error"] == "sign_in_required"
    assert w.ledger.requests == []


async def test_an_agent_without_the_extension_gets_extension_required() -> None:
    async with world() as w:
        w.ledger.without_extension.add(CLIENT_ID)
        response = await w.call(*PROPOSALS["standing"], w.ada())
    assert response.status_code == 403
    assert response.json()["error"] == "extension_required" and response.json()["extension"] == "operations"
    assert 'error="extension_required"' in response.headers["www-authenticate"]
    assert "operation" not in response.json()


async def test_frontdoor_unavailable_is_503_with_retry_after() -> None:
    async with world() as w:
        w.ledger.down = True
        response = await w.call(*PROPOSALS["user"], w.ada())
    assert response.status_code == 503 and response.headers["retry-after"] == "4"
    assert response.json()["error"] == "temporarily_unavailable"


@pytest.mark.parametrize(("url", "body", "status", "error"), [
    (ORDERS, {"items": [{"sku": "NW-NOPE", "quantity": 1}]}, 400, "invalid_request"),
    (ORDERS, {"items": []}, 400, "invalid_request"),
    (ORDERS, {"items": [{"sku": "NW-CHAI", "quantity": 0}]}, 400, "invalid_request"),
    (REORDER, {"order_id": "ord_10307"}, 404, "order_not_found"),  # Grace's, not Ada's
])
async def test_what_cannot_be_ordered_is_refused_before_proposing(url: str, body: Any, status: int,
                                                                 error: str) -> None:
    async with world() as w:
        response = await w.call(url, body, w.ada())
    assert (response.status_code, response.json()["error"]) == (status, error)
    assert w.ledger.requests == []


async def test_the_openapi_description_says_which_endpoints_return_operations() -> None:
    async with world() as w:
        paths = (await w.client.get("/openapi.json")).json()["paths"]
    for path in ("/api/orders", "/api/orders/reorder"):
        post = paths[path]["post"]
        assert "202" in post["responses"] and "operation" in json.dumps(post["responses"]["202"])
        assert "operation" in post["description"]
    assert "get" in paths["/api/orders"]  # reading orders is still there


async def test_without_a_ledger_there_are_no_proposals() -> None:
    async with world(ledger_url=None, webhook_secret=None) as w:
        response = await w.call(*PROPOSALS["standing"], w.ada())
        assert response.status_code in (404, 405)
        assert (await w.client.get("/operations/op_1")).status_code == 404
        assert (await w.client.post("/webhooks/frontdoor", content=b"{}")).status_code in (404, 405)
        paths = (await w.client.get("/openapi.json")).json()["paths"]
        assert "/api/orders/reorder" not in paths and "post" not in paths["/api/orders"]
        mcp = McpClient(w.client, w.agent, w.ada(resource=MCP_URL))
        await mcp.initialize()
        tools = {tool["name"] for tool in (await mcp.call("tools/list"))["tools"]}
    assert tools == {"search_products", "list_orders"}


# --- one action, one operation, across channels --------------------------------------------


async def test_the_mcp_tool_returns_the_same_operation_as_the_api() -> None:
    async with world() as w:
        through_api = await w.propose("user", w.ada())
        mcp = McpClient(w.client, w.agent, w.ada(resource=MCP_URL))
        await mcp.initialize()
        tools = {tool["name"] for tool in (await mcp.call("tools/list"))["tools"]}
        result = await mcp.call("tools/call", {"name": "reorder", "arguments": {}})
        placed = await mcp.call("tools/call", {"name": "place_order",
                                               "arguments": {"items": [{"sku": "NW-CHAI", "quantity": 2}]}})
        bad = await mcp.call("tools/call", {"name": "place_order", "arguments": {"items": [{"sku": "x"}]}})
    assert {"reorder", "place_order"} <= tools
    assert result["structuredContent"]["operation"] == through_api
    assert result.get("isError") is not True
    assert placed["structuredContent"]["operation"]["terms"]["total"]["amount"] == "36.00"
    assert bad["isError"] is True


async def test_the_mcp_tools_need_a_signed_in_session() -> None:
    async with world() as w:
        mcp = McpClient(w.client, w.agent, w.frontdoor.session_token(w.agent, resource=MCP_URL))
        await mcp.initialize()
        response = await mcp.post("tools/call", {"name": "reorder", "arguments": {}})
    assert response.status_code == 403 and 'error="sign_in_required"' in response.headers["www-authenticate"]
    assert w.ledger.requests == []


# --- the concierge: hosted conversations (PAP §7) --------------------------------------------


def said(text: str, *, session_id: str, account: str | None = None, responder: str = "agent",
         event_id: str = "evt_1", conversation_id: str = "cnv_1", user_id: str = "usr_1") -> dict[str, Any]:
    """The data of a ``conversation.message.created`` delivery (docs/conversations.md)."""
    return {"conversation_id": conversation_id, "parent_conversation_id": None, "event_id": event_id,
            "message": {"id": "m1", "sender": "agent", "role": "user", "text": text}, "session_id": session_id,
            "client_id": CLIENT_ID, "user_id": user_id, "account": account,
            "scopes": ["orders:read"] if account else [], "responder": responder, "status": "working",
            "sequence": 1}


async def hear(w: World, data: dict[str, Any], *, msg_id: str = "msg_c1", secret: str = SECRET) -> httpx.Response:
    payload = json.dumps({"type": "conversation.message.created", "timestamp": "2026-09-21T11:50:00Z",
                          "data": data})
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(NOW, UTC), payload)
    return await w.client.post("/webhooks/frontdoor", content=payload, headers={
        "webhook-id": msg_id, "webhook-timestamp": str(NOW), "webhook-signature": signature,
        "content-type": "application/json"})


def signed_in_session(w: World) -> str:
    sid = f"ses_{secrets.token_hex(8)}"
    w.frontdoor.sessions[sid] = SessionState(signed_in=True, account="acct_ada", scope="orders:read")
    return sid


async def test_a_reorder_message_proposes_the_apis_operation_and_the_reply_carries_it() -> None:
    async with world() as w:
        sid = signed_in_session(w)
        through_api = await w.propose("user", w.ada())
        message = said("Please reorder my last order.", session_id=sid, account="acct_ada", user_id=w.agent.user_id)
        heard = await hear(w, message)
        again = await hear(w, message)  # a retry
    assert heard.status_code == again.status_code == 200
    proposed = proposals(w)
    assert len(proposed) == 3 and proposed[1]["caller"] == {"session_id": sid, "client_id": CLIENT_ID,
                                                            "user_id": w.agent.user_id, "account": "acct_ada"}
    assert proposed[1]["action_key"] == proposed[0]["action_key"]  # the same action, the same operation
    posts = w.ledger.conversation_posts()
    assert [action for action, _ in posts] == ["deltas", "deltas", "messages"] * 2
    reply = posts[2][1]
    assert reply["message"]["id"] == "re_evt_1" and reply["sender"] == "agent" and reply["done"] is True
    assert reply["message"]["operation_id"] == through_api["operation_id"]
    assert "nothing is ordered yet" in reply["message"]["text"]
    assert posts[0][1]["text"] + posts[1][1]["text"] == reply["message"]["text"]  # the pieces make the reply
    assert posts[5] == posts[2]  # a retried delivery replies under the same message ID
    assert w.ledger.operations[through_api["operation_id"]]["state"] == "proposed"  # a message confirms nothing


async def test_a_signed_out_message_about_orders_asks_for_sign_in() -> None:
    async with world() as w:
        heard = await hear(w, said("Where is my last order?", session_id="ses_out"))
    assert heard.status_code == 200
    posts = w.ledger.conversation_posts()
    assert posts[0] == ("authorization", {"scope": "orders:read", "error": "sign_in_required"})
    assert "please sign in" in posts[-1][1]["message"]["text"]
    assert proposals(w) == []


async def test_a_reorder_from_a_signed_out_session_proposes_nothing() -> None:
    async with world() as w:
        await hear(w, said("Please reorder my last order.", session_id="ses_out"))
    assert proposals(w) == []
    assert w.ledger.conversation_posts()[0][0] == "authorization"


async def test_the_concierge_is_quiet_while_a_person_answers() -> None:
    async with world() as w:
        heard = await hear(w, said("Hello?", session_id="ses_out", responder="human"))
    assert heard.status_code == 200 and w.ledger.conversation_posts() == []


async def test_a_closed_conversation_is_not_retried_and_an_unreachable_ledger_is() -> None:
    async with world() as w:
        w.ledger.closed.add("cnv_closed")
        closed = await hear(w, said("Hello?", session_id="ses_out", conversation_id="cnv_closed"))
        w.ledger.down = True
        down = await hear(w, said("Hello?", session_id="ses_out"), msg_id="msg_c2")
    assert closed.status_code == 200  # nothing a redelivery could change
    assert down.status_code == 503  # Frontdoor delivers it again


async def test_a_conversation_delivery_with_a_wrong_signature_is_refused() -> None:
    async with world() as w:
        refused = await hear(w, said("Hello?", session_id="ses_out"),
                             secret="whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())
    assert refused.status_code in (400, 401) and w.ledger.conversation_posts() == []


async def test_northwinds_own_conversation_endpoint_is_retired() -> None:
    async with world() as w:
        url = f"{PUBLIC_URL}/poppy/conversations"
        response = await w.client.post(url, json={"message": {"id": "m1", "sender": "agent", "text": "hi"}},
                                       headers=w.agent.auth("POST", url, w.ada()))
    assert response.status_code == 404


# --- the perform webhook -------------------------------------------------------------------


async def test_a_perform_is_done_once_per_idempotency_key() -> None:
    async with world(expose_test_hooks=True) as w:
        operation = await w.propose("standing")
        first = await w.deliver(operation["operation_id"])
        retry = await w.deliver(operation["operation_id"])  # the same webhook-id and key
        redelivered = await w.deliver(operation["operation_id"], msg_id="msg_other")  # same key, new message
        hook = await w.client.get(f"/_test/performed/{operation['operation_id']}")
        performed = performer_of(w.app).performed(operation["operation_id"])
    assert first.status_code == 200 and first.json()["outcome"] == "succeeded"
    assert "Order ord_20001 placed: 2 × Chai, 36.00 EUR charged" in first.json()["result"]["summary"]
    assert retry.json() == first.json() == redelivered.json()
    assert performed == 1 and hook.json() == {"operation_id": operation["operation_id"], "performed": 1}


async def test_a_failed_perform_describes_the_partial_change() -> None:
    async with world() as w:
        operation = await w.propose("fails")
        answer = (await w.deliver(operation["operation_id"])).json()
    assert answer["outcome"] == "failed"
    summary = answer["result"]["summary"]
    assert "1 × Aniseed Syrup" in summary and "10.00 EUR was charged" in summary
    assert "1 × Chang was not ordered or charged" in summary


async def test_an_unknown_outcome_is_202_and_counted_once() -> None:
    async with world() as w:
        operation = await w.propose("unknown")
        first = await w.deliver(operation["operation_id"])
        retry = await w.deliver(operation["operation_id"])
    assert (first.status_code, retry.status_code) == (202, 202)
    assert performer_of(w.app).performed(operation["operation_id"]) == 1


async def test_a_bad_signature_performs_nothing() -> None:
    other = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    async with world() as w:
        operation = await w.propose("standing")
        forged = await w.deliver(operation["operation_id"], secret=other)
        unsigned = await w.client.post("/webhooks/frontdoor", json={"type": "operation.perform", "data": {}})
        hook = await w.client.get(f"/_test/performed/{operation['operation_id']}")
    assert forged.status_code == 401 and forged.json()["reason"] == "bad_signature"
    assert unsigned.status_code == 400
    assert performer_of(w.app).performed(operation["operation_id"]) == 0
    assert hook.status_code == 404  # test hooks are off unless asked for


# --- the operation page ----------------------------------------------------------------------


async def _joined(w: World, operation: dict[str, Any], **state: Any) -> str:
    sid = new_session(w.frontdoor, **state)
    assert (await join(w.client, w.frontdoor.assertion(sid, operation["url"]))).status_code == 303
    return sid


async def test_the_page_shows_in_the_joined_browser_and_confirms_once() -> None:
    async with world() as w:
        operation = await w.propose("user")
        sid = await _joined(w, operation, signed_in=True, account="acct_ada", scope="orders:read")
        page = await w.client.get(operation["url"])
        assert page.status_code == 200 and "Reorder ord_10391" in page.text
        assert '<input type="hidden" name="revision" value="1">' in page.text
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        confirmed = await w.client.post(operation["url"], data={"csrf": csrf, "revision": "1"},
                                        headers={"Origin": PUBLIC_URL})
        again = await w.client.post(operation["url"], data={"csrf": csrf, "revision": "1"})
    assert confirmed.status_code == 200 and "in_progress" in confirmed.text and "Confirm</button>" not in confirmed.text
    assert again.status_code == 200
    confirms = [body for method, path, body in w.ledger.requests if path.endswith("/confirm")]
    assert confirms[0] == {"revision": 1, "session_id": sid}
    assert w.ledger.operations[operation["operation_id"]]["confirmation"]["revision"] == 1


async def test_the_page_is_for_the_accounts_joined_browser_only() -> None:
    async with world() as w:
        operation = await w.propose("user")
        assert (await w.client.get(operation["url"])).status_code == 401  # not joined
        sid = await _joined(w, operation, signed_in=True, account="acct_grace", scope="orders:read")
        assert (await w.client.get(operation["url"])).status_code == 404  # another account's
        assert (await w.client.get("/operations/op_unknown")).status_code == 404
        w.frontdoor.sessions[sid] = SessionState()  # signed out
        assert (await w.client.get(operation["url"])).status_code == 403


async def test_a_confirm_needs_the_pages_csrf_token_and_origin() -> None:
    async with world() as w:
        operation = await w.propose("user")
        await _joined(w, operation, signed_in=True, account="acct_ada", scope="orders:read")
        page = await w.client.get(operation["url"])
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        forged = await w.client.post(operation["url"], data={"csrf": "x" * 64, "revision": "1"})
        cross = await w.client.post(operation["url"], data={"csrf": csrf, "revision": "1"},
                                    headers={"Origin": "https://evil.example"})
    assert (forged.status_code, cross.status_code) == (403, 403)
    assert not any(path.endswith("/confirm") for _, path, _ in w.ledger.requests)


async def test_an_older_revision_is_not_confirmed_on_the_page() -> None:
    async with world() as w:
        operation = await w.propose("user")
        await _joined(w, operation, signed_in=True, account="acct_ada", scope="orders:read")
        page = await w.client.get(operation["url"])
        csrf = page.text.split('name="csrf" value="')[1].split('"')[0]
        w.ledger.revise(operation["operation_id"], summary="Reorder ord_10391 for 40.00 EUR")
        stale = await w.client.post(operation["url"], data={"csrf": csrf, "revision": "1"})
    assert stale.status_code == 409 and "40.00 EUR" in stale.text and 'value="2"' in stale.text
    assert w.ledger.operations[operation["operation_id"]]["state"] == "proposed"


def test_the_config_reads_the_ledger_and_webhook_secrets(tmp_path: Any) -> None:
    poppy = tmp_path / "poppy.json"
    poppy.write_text(json.dumps(POPPY))
    env = {"NORTHWIND_ISSUER": ISSUER, "NORTHWIND_CREDENTIAL": CREDENTIAL, "NORTHWIND_PUBLIC_URL": PUBLIC_URL,
           "NORTHWIND_POPPY_JSON": str(poppy), "NORTHWIND_LEDGER_URL": LEDGER,
           "NORTHWIND_WEBHOOK_SECRET": f"{SECRET}, whsec_b2xkb2xkb2xkb2xkb2xkb2xk"}
    config = NorthwindConfig.from_env(env)
    assert config.ledger_url == LEDGER
    assert config.webhook_secrets == (SECRET, "whsec_b2xkb2xkb2xkb2xkb2xkb2xk")
    assert SECRET not in repr(config)
    bare = NorthwindConfig.from_env({k: v for k, v in env.items() if "LEDGER" not in k and "WEBHOOK" not in k})
    assert (bare.ledger_url, bare.webhook_secrets, bare.expose_test_hooks) == (None, (), False)


def test_mcp_headers_are_shared() -> None:
    assert MCP_HEADERS["Accept"].startswith("application/json")
