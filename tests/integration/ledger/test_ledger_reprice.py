"""Re-pricing at confirm time: the kind's re-price endpoint is asked for current terms first."""

from __future__ import annotations

from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.ledger.conftest import Shop
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb


async def with_reprice(shop: Shop, web: MockWeb, answer: Any) -> list[dict[str, Any]]:
    hook = f"https://{shop.tenant.slug}.shop.example/webhooks/reprice"
    r = await shop.console.post("/api/v1/webhook-endpoints", json={"url": hook}, headers=shop.tenant.auth)
    created = r.json()
    asked: list[dict[str, Any]] = []

    async def quote(request: httpx.Request) -> httpx.Response:
        payload = Webhook(created["secret"]).verify(request.content, dict(request.headers))
        asked.append(payload)
        return answer(payload) if callable(answer) else answer

    web.handle(hook, quote)
    r = await shop.console.put("/api/v1/operation-kinds/order.place", headers=shop.tenant.auth, json={
        "perform_endpoint_id": shop.endpoint_id, "reprice_endpoint_id": created["endpoint"]["id"],
        "scopes": ["poppy:write"]})
    assert r.status_code == 200, r.text
    return asked


async def propose(shop: Shop, agent: TestAgent) -> tuple[dict[str, Any], dict[str, Any]]:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    r = await shop.propose(tokens, agent, user)
    return tokens, r.json()["operation"]


async def test_changed_terms_become_a_revision_and_terms_changed(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    def rise(payload: dict[str, Any]) -> httpx.Response:
        assert payload["type"] == "operation.reprice"
        return httpx.Response(200, json={"summary": "Order 2 x espresso beans for 44.00 EUR",
                                         "terms": {"total": {"amount": "44.00", "currency": "EUR"}}})

    asked = await with_reprice(shop, web, rise)
    tokens, op = await propose(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 409 and r.json()["error"] == "terms_changed"
    assert r.json()["operation"]["revision"] == 2 and "44.00" in r.json()["operation"]["summary"]
    assert asked and shop.receiver.performed == {}


async def test_unchanged_terms_confirm(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    def same(payload: dict[str, Any]) -> httpx.Response:
        op = payload["data"]["operation"]
        return httpx.Response(200, json={"summary": op["summary"], "terms": op["terms"]})

    await with_reprice(shop, web, same)
    tokens, op = await propose(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded"


async def test_no_current_terms_no_confirm(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    await with_reprice(shop, web, httpx.Response(503))
    tokens, op = await propose(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable" and "retry-after" in r.headers
    read = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.json()["state"] == "proposed"


async def test_an_endpoint_a_kind_uses_cannot_be_deleted(shop: Shop) -> None:
    r = await shop.console.delete(f"/api/v1/webhook-endpoints/{shop.endpoint_id}", headers=shop.tenant.auth)
    assert r.status_code == 409 and r.json()["code"] == "webhook_endpoint_in_use", r.text
