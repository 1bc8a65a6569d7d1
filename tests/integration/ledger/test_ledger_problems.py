"""One error shape for companies: the ledger API (``/{slug}/v1/...``) refuses with RFC 9457
``application/problem+json``; the agents' endpoints keep the protocol's ``{"error", "error_description"}``
and challenges."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import unique
from tests.integration.ledger.conftest import LEDGER, Shop
from tests.support.agent import TestAgent

PROBLEM = "application/problem+json"


def assert_problem(r: Any, status: int, code: str, *, routed: bool = True) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM), r.headers["content-type"]
    assert r.headers["cache-control"] == "no-store"
    body: dict[str, Any] = r.json()
    assert body["type"] == f"https://frontdoor.dev/problems/{code}"
    assert (body["status"], body["code"]) == (status, code)
    assert body["title"] and body["detail"]
    if routed:  # a path no route matches is refused before the request-id middleware
        assert body["request_id"] == r.headers["x-request-id"]
    assert "error" not in body and "error_description" not in body
    return body


async def test_an_unauthenticated_company_call_is_a_problem_with_a_challenge(shop: Shop) -> None:
    r = await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations", headers={"Authorization": "Bearer nope"})
    assert_problem(r, 401, "invalid_client")
    assert r.headers["www-authenticate"] == 'Bearer realm="frontdoor-ledger"'


async def test_an_unknown_operation_and_a_bad_body_are_problems(shop: Shop) -> None:
    slug = shop.tenant.slug
    assert_problem(await shop.ledger.get(f"/{slug}/v1/operations/op_unknown", headers=shop.api),
                   404, "operation_not_found")
    r = await shop.ledger.post(f"/{slug}/v1/operations", content=b'{"kind": 1, "x-canary": 2}',
                               headers={**shop.api, "Content-Type": "application/json"})
    body = assert_problem(r, 400, "invalid_request")
    assert "canary" not in r.text and body["detail"].startswith("The body does not fit the schema")
    assert_problem(await shop.ledger.get(f"/{slug}/v1/operations", params={"limit": "0"}, headers=shop.api),
                   400, "invalid_request")
    assert_problem(await shop.ledger.get(f"/{slug}/v1/operations", params={"cursor": "zz"}, headers=shop.api),
                   400, "invalid_cursor")


async def test_litestar_refusals_on_the_ledger_api_are_problems(shop: Shop) -> None:
    slug = shop.tenant.slug
    too_big = b"{" + b" " * 70_000 + b"}"
    r = await shop.ledger.post(f"/{slug}/v1/operations", content=too_big,
                               headers={**shop.api, "Content-Type": "application/json"})
    assert_problem(r, 413, "invalid_request")
    assert_problem(await shop.ledger.get(f"/{slug}/v1/no-such-thing", headers=shop.api), 404, "not_found",
                   routed=False)


async def test_a_proposal_for_an_agent_without_the_extension_is_a_problem(shop: Shop, web: Any) -> None:
    from tests.integration.ledger.conftest import operations_agent

    plain = operations_agent(web, extensions={})
    user = unique("usr_")
    tokens = await shop.company.sign_in(plain, user, unique("acct_"))
    assert_problem(await shop.propose(tokens, plain, user), 403, "extension_required")


async def test_a_website_confirm_of_an_old_revision_is_a_problem_with_the_operation(shop: Shop,
                                                                                   agent: TestAgent) -> None:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    op = (await shop.propose(tokens, agent, user)).json()["operation"]
    slug = shop.tenant.slug
    r = await shop.ledger.post(f"/{slug}/v1/operations/{op['operation_id']}/revisions", headers=shop.api,
                               json={"summary": "Order 3 x espresso beans for 57.00 EUR"})
    assert r.status_code == 200, r.text
    r = await shop.ledger.post(f"/{slug}/v1/operations/{op['operation_id']}/confirm", headers=shop.api,
                               json={"revision": op["revision"], "session_id": tokens["session_id"]})
    body = assert_problem(r, 409, "terms_changed")
    assert body["operation"]["revision"] == op["revision"] + 1
    assert "www-authenticate" not in r.headers  # the agent's DPoP challenge means nothing to a company


async def test_the_conversations_api_refuses_with_problems(shop: Shop) -> None:
    r = await shop.ledger.get(f"/{shop.tenant.slug}/v1/conversations", headers=shop.api)
    assert_problem(r, 404, "conversations_not_enabled")
    r = await shop.ledger.post(f"/{shop.tenant.slug}/v1/conversations/cnv_x/close", headers={})
    assert_problem(r, 401, "invalid_client")


@pytest.mark.parametrize("path", ["operations/op_unknown", "conversations/cnv_unknown/events"])
async def test_the_agents_endpoints_keep_the_protocol_shape(shop: Shop, path: str) -> None:
    r = await shop.ledger.get(f"{LEDGER}/{shop.tenant.slug}/{path}", headers={"Authorization": "DPoP nope"})
    assert r.status_code in (401, 404), r.text
    assert r.headers["content-type"].startswith("application/json")
    assert set(r.json()) == {"error", "error_description"}
    if r.status_code == 401:
        assert r.headers["www-authenticate"].startswith("DPoP")
