"""Hostile requests at every ledger endpoint get a clean refusal that echoes nothing."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import unique
from tests.integration.ledger.conftest import Shop
from tests.support.agent import TestAgent
from tests.support.fixed_windows import room_in_window

CANARY = "canary-<script>-" + "x" * 8


async def propose_ok(shop: Shop, agent: TestAgent) -> tuple[dict[str, Any], dict[str, Any], str]:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    r = await shop.propose(tokens, agent, user)
    assert r.status_code == 201, r.text
    return tokens, r.json()["operation"], user


@pytest.mark.parametrize("over", [
    {"summary": ""}, {"summary": "x" * 2001}, {"summary": 5}, {"terms": [CANARY]}, {"terms": CANARY},
    {"expires_in": -1}, {"expires_in": "soon"}, {"expires_in": True}, {"url": f"javascript:{CANARY}"},
    {"url": f"http://evil.example/{CANARY}"}, {"action_key": "k" * 201}, {"kind": CANARY},
    {"user_approval_required": "yes"}, {"unexpected": CANARY}, {"input": [1, 2]},
    {"caller": {"session_id": CANARY, "client_id": "x", "user_id": "y"}},
    {"caller": {"session_id": "ses_x"}},
    {"summary": "nul\u0000byte"}, {"terms": {"a": "nul\u0000"}}, {"input": {"a": "\u0000"}},
    {"action_key": "a\u0000"}, {"kind": "order.place\u0000"}, {"kind": "order.place\n"},
    {"caller": {"session_id": "ses_\u0000", "client_id": "x", "user_id": "y"}},
])
async def test_a_bad_proposal_is_refused_cleanly(shop: Shop, agent: TestAgent, over: dict[str, Any]) -> None:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    r = await shop.propose(tokens, agent, user, **over)
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"].startswith("application/problem+json")  # RFC 9457, like the console
    assert set(r.json()) <= {"type", "title", "status", "code", "detail", "request_id"}
    assert CANARY not in r.text


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b"null", b'{"kind": "order.place"}' * 3, b"\xff\xfe"])
async def test_unparseable_bodies(shop: Shop, raw: bytes) -> None:
    r = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations", content=raw,
                               headers={**shop.api, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"


async def test_an_oversized_body_is_refused(shop: Shop) -> None:
    r = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations", content=b"{" + b" " * 70_000 + b"}",
                               headers={**shop.api, "Content-Type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("auth", [None, "Bearer nope", "Basic Zm9vOmJhcg==", f"Bearer fdrs_{CANARY}"])
async def test_the_ledger_api_needs_a_credential(shop: Shop, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    for method, path in [("GET", "/v1/operations"), ("POST", "/v1/operations"), ("GET", "/v1/operations/op_x"),
                         ("POST", "/v1/operations/op_x/outcome"), ("POST", "/v1/operations/op_x/revisions"),
                         ("POST", "/v1/operations/op_x/confirm")]:
        r = await shop.ledger.request(method, f"/{shop.tenant.slug}{path}", headers=headers, json={})
        assert r.status_code == 401 and r.json()["code"] == "invalid_client", (method, path, r.text)
        assert CANARY not in r.text


async def test_the_operations_endpoint_needs_a_dpop_session_token(shop: Shop, agent: TestAgent) -> None:
    tokens, op, _ = await propose_ok(shop, agent)
    url = shop.url(op["operation_id"])
    none = await shop.ledger.get(url)
    assert none.status_code == 401 and none.headers["www-authenticate"].startswith("DPoP")
    bearer = await shop.ledger.get(url, headers={"Authorization": f"Bearer {tokens['access_token']}"})
    assert bearer.status_code == 401 and bearer.json()["error"] == "invalid_token"
    in_query = await shop.ledger.get(f"{url}?access_token={tokens['access_token']}", headers={
        "Authorization": f"DPoP {tokens['access_token']}",
        "DPoP": agent.dpop("GET", url, token=tokens["access_token"], iat=shop.now())})
    assert in_query.status_code == 400 and in_query.json()["error"] == "invalid_request"
    assert tokens["access_token"] not in in_query.text
    wrong_url = await shop.ledger.get(url, headers={
        "Authorization": f"DPoP {tokens['access_token']}",
        "DPoP": agent.dpop("GET", url + "/x", token=tokens["access_token"], iat=shop.now())})
    assert wrong_url.status_code == 401 and wrong_url.json()["error"] == "invalid_dpop_proof"


async def test_a_replayed_proof_is_refused(shop: Shop, agent: TestAgent) -> None:
    tokens, op, _ = await propose_ok(shop, agent)
    url = shop.url(op["operation_id"])
    headers = {"Authorization": f"DPoP {tokens['access_token']}",
               "DPoP": agent.dpop("GET", url, token=tokens["access_token"], iat=shop.now())}
    assert (await shop.ledger.get(url, headers=headers)).status_code == 200
    again = await shop.ledger.get(url, headers=headers)
    assert again.status_code == 401 and again.json()["error"] == "invalid_dpop_proof"


@pytest.mark.parametrize("operation_id", ["op_" + "a" * 300, "op_%00", "..%2F..%2Fetc", CANARY])
async def test_strange_operation_ids_are_not_found(shop: Shop, agent: TestAgent, operation_id: str) -> None:
    tokens, _, _ = await propose_ok(shop, agent)
    r = await shop.agent(agent, tokens["access_token"], quote(operation_id, safe="%"))  # as a careful agent sends it
    assert r.status_code in (404, 400), r.text
    assert CANARY not in r.text


async def test_list_filters_with_nul_are_refused(shop: Shop) -> None:
    r = await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations", params={"kind": "a\x00b"}, headers=shop.api)
    assert r.status_code == 400


async def test_an_unknown_tenant_is_not_found(shop: Shop, agent: TestAgent) -> None:
    r = await shop.ledger.get("/no-such-tenant/operations/op_x")
    assert r.status_code == 404 and r.json()["error"] == "operation_not_found"


async def test_outcome_reports_are_checked(shop: Shop, agent: TestAgent) -> None:
    _, op, _ = await propose_ok(shop, agent)
    path = f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome"
    for body in [{"outcome": "succeeded", "result": {}}, {"outcome": "maybe", "result": {"summary": "x"}},
                 {"outcome": "failed", "result": {"summary": "x", "data": CANARY}},
                 {"outcome": "failed", "result": {"summary": "x\u0000"}},
                 {"outcome": "failed", "result": {"summary": "x", "data": {"k": "\u0000"}}}]:
        r = await shop.ledger.post(path, json=body, headers=shop.api)
        assert r.status_code == 400, r.text
        assert CANARY not in r.text
    early = await shop.ledger.post(path, json={"outcome": "succeeded", "result": {"summary": "Done"}},
                                   headers=shop.api)
    assert early.status_code == 409 and early.json()["code"] == "not_in_progress"


async def test_too_many_requests_from_one_session(shop: Shop, agent: TestAgent, monkeypatch: Any) -> None:
    from frontdoor_ledger.http import agent_operations

    monkeypatch.setattr(agent_operations, "REQUESTS_PER_SESSION_PER_MINUTE", 3)
    await room_in_window(60, needed_s=15)  # the limiter counts in fixed wall-clock minutes: all in one
    tokens, op, _ = await propose_ok(shop, agent)
    answers = [await shop.agent(agent, tokens["access_token"], op["operation_id"]) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["error"] == "rate_limited" and answers[-1].headers["retry-after"].isdigit()
