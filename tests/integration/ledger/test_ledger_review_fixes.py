"""Regression tests for a review of the ledger: each case below once went wrong."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.ledger.conftest import Shop
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


async def proposed(shop: Shop, agent: TestAgent, **over: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    r = await shop.propose(tokens, agent, user, **over)
    assert r.status_code == 201, r.text
    return user, tokens, r.json()["operation"]


async def test_a_final_operation_is_never_performed_again(shop: Shop, agent: TestAgent, runtime: Any) -> None:
    """OPS-6-02/6-03: the company reports `failed` while a retry is pending: the retry never goes out."""
    from frontdoor_webhooks.delivery import claim

    shop.receiver.answer = "error"
    _, tokens, op = await proposed(shop, agent)
    assert (await shop.confirm(agent, tokens["access_token"], op)).json()["state"] == "in_progress"
    report = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
                                    headers=shop.api, json={"outcome": "failed",
                                                            "result": {"summary": "Nothing was charged"}})
    assert report.status_code == 200
    detail = (await shop.console.get(f"/api/v1/operations/{op['operation_id']}", headers=shop.tenant.auth)).json()
    message_id = detail["perform_message_id"]
    async with runtime.pool.acquire() as conn:
        state = await conn.fetchval("SELECT state FROM webhook_messages WHERE id = $1", message_id)
        claimed = await claim(conn, message_id, runtime.clock(), timedelta(seconds=30))
    assert state == "superseded" and claimed is None
    again = await shop.console.post(f"/api/v1/webhook-messages/{message_id}/redeliver", headers=shop.tenant.auth)
    assert again.status_code == 409 and again.json()["code"] == "webhook_message_superseded"
    assert shop.receiver.performed == {}


async def test_a_signed_out_proposal_becomes_the_confirming_accounts(shop: Shop, agent: TestAgent) -> None:
    user = unique("usr_")
    signed_out = await shop.company.session(agent, user)
    r = await shop.propose(signed_out, agent, user)
    op = r.json()["operation"]
    account = unique("acct_")
    tokens = await shop.company.sign_in(agent, user, account)
    done = await shop.confirm(agent, tokens["access_token"], op)
    assert done.status_code == 200 and done.json()["state"] == "succeeded"
    assert shop.receiver.deliveries[-1]["data"]["account"] == account
    other = await shop.company.sign_in(agent, user, unique("acct_"))
    assert (await shop.agent(agent, other["access_token"], op["operation_id"])).status_code == 404


async def _reprice_kind(shop: Shop, web: MockWeb, handler: Any) -> None:
    hook = f"https://{shop.tenant.slug}.shop.example/webhooks/quote"
    created = (await shop.console.post("/api/v1/webhook-endpoints", json={"url": hook},
                                       headers=shop.tenant.auth)).json()
    secret = created["secret"]

    async def quote(request: httpx.Request) -> httpx.Response:
        payload = Webhook(secret).verify(request.content, dict(request.headers))
        assert payload["type"] == "operation.reprice" and "idempotency_key" not in payload["data"]
        return await handler(payload)

    web.handle(hook, quote)
    r = await shop.console.put("/api/v1/operation-kinds/order.place", headers=shop.tenant.auth, json={
        "perform_endpoint_id": shop.endpoint_id, "reprice_endpoint_id": created["endpoint"]["id"],
        "scopes": ["poppy:write"]})
    assert r.status_code == 200, r.text


async def test_reprice_racing_a_website_confirm_answers_the_operation(shop: Shop, agent: TestAgent,
                                                                      web: MockWeb, settings: Any,
                                                                      clock: ShiftableClock) -> None:
    import json

    import asyncpg
    from frontdoor_operations import ledger as ledger_lib

    state: dict[str, Any] = {}

    async def meanwhile(payload: dict[str, Any]) -> httpx.Response:
        op = payload["data"]["operation"]
        # While the quote is being made, the user confirms on the company's website (the same CAS),
        # from another connection (the handler runs in the app's own loop).
        conn = await asyncpg.connect(settings.database_url)
        try:
            for codec in ("json", "jsonb"):
                await conn.set_type_codec(codec, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
            _, won = await ledger_lib.confirm(conn, shop.tenant.id, op["operation_id"], revision=1,
                                              approved_by="user", via="website", now=clock())
        finally:
            await conn.close()
        state["web"] = won
        return httpx.Response(200, json={"summary": op["summary"] + " (now 41.00 EUR)", "terms": op["terms"]})

    await _reprice_kind(shop, web, meanwhile)
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert state["web"] is not None  # the website's confirm won while the agent's was being re-priced
    assert r.status_code == 200, r.text  # the agent's lost confirm is answered the operation, unchanged
    assert r.json()["state"] == "in_progress" and r.json()["confirmation"]["revision"] == 1


async def test_reprice_keeps_terms_when_the_quote_leaves_them_out(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    async def summary_only(payload: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, json={"summary": "Order 2 x espresso beans for 39.00 EUR"})

    await _reprice_kind(shop, web, summary_only)
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 409 and r.json()["operation"]["terms"] == op["terms"]


async def test_a_malformed_quote_is_unavailable_not_a_revision(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    async def bad(payload: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, json={"summary": "x" * 3000, "terms": [1, 2]})

    await _reprice_kind(shop, web, bad)
    _, tokens, op = await proposed(shop, agent)
    for _ in range(2):
        r = await shop.confirm(agent, tokens["access_token"], op)
        assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable"
    read = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.json()["revision"] == 1


async def test_the_reprice_endpoint_cannot_be_the_perform_endpoint(shop: Shop) -> None:
    r = await shop.console.put("/api/v1/operation-kinds/order.place", headers=shop.tenant.auth, json={
        "perform_endpoint_id": shop.endpoint_id, "reprice_endpoint_id": shop.endpoint_id})
    assert r.status_code in (400, 422) and r.json()["code"] == "invalid_reprice_endpoint"


async def test_no_confirm_while_the_perform_endpoint_is_disabled(shop: Shop, agent: TestAgent) -> None:
    _, tokens, op = await proposed(shop, agent)
    assert (await shop.console.post(f"/api/v1/webhook-endpoints/{shop.endpoint_id}/disable",
                                    headers=shop.tenant.auth)).status_code == 200
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 503 and "retry-after" in r.headers
    assert (await shop.agent(agent, tokens["access_token"], op["operation_id"])).json()["state"] == "proposed"


async def test_a_gone_endpoint_flags_the_operation(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    async def gone(request: httpx.Request) -> httpx.Response:
        return httpx.Response(410)

    web.handle(f"https://{shop.tenant.slug}.shop.example/webhooks/frontdoor", gone)
    _, tokens, op = await proposed(shop, agent)
    assert (await shop.confirm(agent, tokens["access_token"], op)).json()["state"] == "in_progress"
    detail = (await shop.console.get(f"/api/v1/operations/{op['operation_id']}", headers=shop.tenant.auth)).json()
    assert detail["needs_attention"] and detail["attention_reason"] == "endpoint_disabled"


async def test_a_lapsed_proposal_does_not_block_its_action_key(shop: Shop, agent: TestAgent,
                                                               clock: ShiftableClock) -> None:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    first = await shop.propose(tokens, agent, user, action_key="cart:9", expires_in=60)
    clock.advance(seconds=61)
    second = await shop.propose(tokens, agent, user, action_key="cart:9")
    assert second.status_code == 201
    assert second.json()["operation"]["operation_id"] != first.json()["operation"]["operation_id"]


async def test_an_accepted_perform_reported_quickly_answers_the_confirm(shop: Shop, agent: TestAgent,
                                                                        settings: Any) -> None:
    """A 202, then the outcome reported from another process within the budget: one round trip."""
    import threading

    import asyncpg
    from frontdoor_core.redis_client import create_redis
    from frontdoor_operations import ledger as ledger_lib
    from frontdoor_operations.settled import publish_settled

    shop.receiver.answer = "accepted"
    _, tokens, op = await proposed(shop, agent)

    async def report_from_elsewhere() -> None:  # another process: its own connection, loop and Redis client
        await asyncio.sleep(0.5)
        conn = await asyncpg.connect(settings.database_url)
        redis = create_redis(settings.redis_url)
        try:
            await conn.set_type_codec("jsonb", encoder=__import__("json").dumps, decoder=__import__("json").loads,
                                      schema="pg_catalog")
            await ledger_lib.record_outcome(conn, shop.tenant.id, op["operation_id"], outcome="succeeded",
                                            result={"summary": "Order 9 placed"},
                                            now=__import__("datetime").datetime.now(__import__("datetime").UTC))
            await publish_settled(redis, op["operation_id"])
        finally:
            await conn.close()
            await redis.aclose()

    reporter = threading.Thread(target=lambda: asyncio.run(report_from_elsewhere()))
    reporter.start()
    try:
        r = await shop.confirm(agent, tokens["access_token"], op)  # the test client blocks this loop meanwhile
    finally:
        reporter.join(10)
    assert r.json().get("state") == "succeeded", r.text


async def test_company_api_inputs_that_once_crashed(shop: Shop) -> None:
    base = f"/{shop.tenant.slug}/v1/operations"
    assert (await shop.ledger.get(base, params={"limit": "²"}, headers=shop.api)).status_code == 400
    assert (await shop.ledger.get(base, params={"since": "0001-01-01T00:00:00+05:00"},
                                  headers=shop.api)).status_code == 400
    echo = await shop.ledger.post(base, headers=shop.api, json={"kind": "x", "<img src=x>": 1})
    assert echo.status_code == 400 and "<img" not in echo.text
