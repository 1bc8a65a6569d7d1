"""The isolation matrix for operations and webhooks: what tenant A made is invisible, unusable and
unrevocable under tenant B, through the management API, the ledger API and the operations endpoint."""

from __future__ import annotations

from typing import Any

from tests.conftest import unique
from tests.integration.ledger.conftest import Shop, make_shop
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


async def test_operations_and_webhooks_isolation_matrix(
        shop: Shop, agent: TestAgent, console: Any, issuer: Any, ledger: Any, other_tenant: Any,
        clock: ShiftableClock, store: Any, web: MockWeb) -> None:
    a = shop
    b = await make_shop(console, issuer, ledger, other_tenant, clock, store, web)
    # --- under A: an operation with its perform message, an endpoint, a kind
    user = unique("usr_")
    tokens = await a.company.sign_in(agent, user, unique("acct_"))
    op = (await a.propose(tokens, agent, user)).json()["operation"]
    a.receiver.answer = "error"
    await a.confirm(agent, tokens["access_token"], op)
    detail = (await console.get(f"/api/v1/operations/{op['operation_id']}", headers=a.tenant.auth)).json()
    message_id = detail["perform_message_id"]
    assert message_id
    endpoint = a.endpoint_id
    bh = b.tenant.auth

    # --- invisible under B (management API)
    assert op["operation_id"] not in {o["operation"]["operation_id"] for o in
                                      (await console.get("/api/v1/operations", headers=bh)).json()["data"]}
    assert (await console.get(f"/api/v1/operations/{op['operation_id']}", headers=bh)).status_code == 404
    assert endpoint not in {e["id"] for e in (await console.get("/api/v1/webhook-endpoints", headers=bh)).json()["data"]}
    assert (await console.get(f"/api/v1/webhook-endpoints/{endpoint}", headers=bh)).status_code == 404
    assert (await console.get(f"/api/v1/webhook-endpoints/{endpoint}/messages", headers=bh)).status_code == 404
    assert (await console.get(f"/api/v1/webhook-messages/{message_id}", headers=bh)).status_code == 404
    b_kinds = (await console.get("/api/v1/operation-kinds", headers=bh)).json()["data"]
    assert all(k["perform_endpoint_id"] != endpoint for k in b_kinds)

    # --- unusable and unrevocable under B
    for method, path, body in [
        ("POST", f"/api/v1/webhook-endpoints/{endpoint}", {"description": "taken"}),
        ("POST", f"/api/v1/webhook-endpoints/{endpoint}/rotate-secret", None),
        ("POST", f"/api/v1/webhook-endpoints/{endpoint}/disable", None),
        ("POST", f"/api/v1/webhook-endpoints/{endpoint}/enable", None),
        ("POST", f"/api/v1/webhook-endpoints/{endpoint}/test", None),
        ("POST", f"/api/v1/webhook-messages/{message_id}/redeliver", None),
        ("DELETE", f"/api/v1/webhook-endpoints/{endpoint}", None),
    ]:
        r = await console.request(method, path, headers=bh, json=body)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
    # B cannot point its own kind at A's endpoint.
    r = await console.put("/api/v1/operation-kinds/steal", headers=bh, json={"perform_endpoint_id": endpoint})
    assert r.status_code in (400, 422) and r.json()["code"] == "unknown_endpoint", r.text
    # The ledger API under B's slug and credential does not know A's operation.
    for method, path, body in [
        ("GET", f"/{b.tenant.slug}/v1/operations/{op['operation_id']}", None),
        ("POST", f"/{b.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
         {"outcome": "failed", "result": {"summary": "forged"}}),
        ("POST", f"/{b.tenant.slug}/v1/operations/{op['operation_id']}/revisions", {"summary": "forged"}),
    ]:
        r = await ledger.request(method, path, headers=b.api, json=body)
        assert r.status_code == 404, (method, path, r.status_code, r.text)
    # A's operation under B's operations endpoint, with A's own token: not a token here.
    url = b.url(op["operation_id"])
    r = await ledger.get(url, headers={"Authorization": f"DPoP {tokens['access_token']}",
                                       "DPoP": agent.dpop("GET", url, token=tokens["access_token"], iat=a.now())})
    assert r.status_code == 401

    # --- A's objects are intact
    mine = (await console.get(f"/api/v1/operations/{op['operation_id']}", headers=a.tenant.auth)).json()
    assert mine["operation"]["state"] == "in_progress"
    assert (await console.get(f"/api/v1/webhook-endpoints/{endpoint}", headers=a.tenant.auth)).json()["enabled"]
