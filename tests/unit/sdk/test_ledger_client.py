"""FrontdoorLedger against a fake ledger (httpx.MockTransport): requests, answers, refusals, failing closed."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from frontdoor_sdk import (
    Caller,
    FrontdoorLedger,
    LedgerCredentialRefused,
    LedgerError,
    LedgerRefused,
    LedgerUnavailable,
    ProposeResult,
    operation_accepted,
)

from tests.unit.sdk.kit import CLIENT_ID, CREDENTIAL

LEDGER = "https://ledger.frontdoor.test/acme"
OPS = f"{LEDGER}/v1/operations"
CALLER = Caller(client_id=CLIENT_ID, user_id="usr_1", session_id="ses_1", signed_in=True, account="acct_1",
                scopes=frozenset({"orders:read"}), token_type="DPoP")
OPERATION = {"operation_id": "op_1", "revision": 1, "state": "proposed", "summary": "Order 2 x Chai for 36.00 EUR",
             "terms": {"total": {"amount": "36.00", "currency": "EUR"}}, "expires_at": "2026-11-30T10:15:00Z",
             "user_approval_required": True, "url": "https://shop.example/operations/op_1",
             "confirmation": None, "result": None}
DETAILS = {"kind": "order.place", "client_id": CLIENT_ID, "user_id": "usr_1", "account": "acct_1",
           "session_id": "ses_1", "action_key": "order:1", "input": {"cart": "7f3a"},
           "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:00:00Z", "needs_attention": False}


def ledger(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[FrontdoorLedger, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return FrontdoorLedger(LEDGER, CREDENTIAL, http=httpx.AsyncClient(transport=httpx.MockTransport(record))), seen


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content)


async def test_propose_sends_the_caller_and_every_field_with_the_credential() -> None:
    client, seen = ledger(lambda _: httpx.Response(201, json={"operation": OPERATION}))
    result = await client.propose(
        CALLER, kind="order.place", summary="Order 2 x Chai for 36.00 EUR",
        terms={"total": {"amount": "36.00", "currency": "EUR"}}, user_approval_required=False, expires_in=900,
        action_key="order:1", input={"cart": "7f3a"}, url="https://shop.example/operations/{operation_id}",
    )
    assert result == ProposeResult(operation=OPERATION, created=True)
    request = seen[0]
    assert (request.method, str(request.url)) == ("POST", OPS)
    assert request.headers["authorization"] == f"Bearer {CREDENTIAL}"
    assert request.headers["content-type"] == "application/json"
    assert body_of(request) == {
        "kind": "order.place",
        "caller": {"session_id": "ses_1", "client_id": CLIENT_ID, "user_id": "usr_1"},
        "summary": "Order 2 x Chai for 36.00 EUR",
        "terms": {"total": {"amount": "36.00", "currency": "EUR"}},
        "user_approval_required": False,
        "expires_in": 900,
        "action_key": "order:1",
        "input": {"cart": "7f3a"},
        "url": "https://shop.example/operations/{operation_id}",
    }


async def test_propose_omits_what_is_not_given_and_needs_the_users_approval_by_default() -> None:
    client, seen = ledger(lambda _: httpx.Response(201, json={"operation": OPERATION}))
    await client.propose(CALLER, kind="order.place", summary="s")
    assert body_of(seen[0]) == {"kind": "order.place", "summary": "s", "user_approval_required": True,
                                "caller": {"session_id": "ses_1", "client_id": CLIENT_ID, "user_id": "usr_1"}}


async def test_the_same_action_key_returns_the_existing_operation() -> None:
    client, _ = ledger(lambda _: httpx.Response(200, json={"operation": OPERATION}))
    result = await client.propose(CALLER, kind="order.place", summary="s", action_key="order:1")
    assert result.created is False
    assert operation_accepted(result) == {"operation": OPERATION} == operation_accepted(result.operation)


async def test_extension_required_becomes_the_agents_403() -> None:
    client, _ = ledger(lambda _: httpx.Response(403, json={
        "error": "extension_required", "error_description": "the agent does not list operations",
        "extension": "operations"}))
    with pytest.raises(LedgerRefused) as raised:
        await client.propose(CALLER, kind="order.place", summary="s")
    error = raised.value
    assert (error.code, error.status, error.description) == ("extension_required", 403,
                                                             "the agent does not list operations")
    answer = error.refusal()
    assert answer.status == 403
    assert answer.body["error"] == "extension_required"
    assert answer.body["extension"] == "operations"
    assert 'error="extension_required"' in answer.headers["WWW-Authenticate"]
    assert answer.headers["Cache-Control"] == "no-store"
    mcp = error.refusal(resource_url="https://shop.example/mcp")
    assert mcp.headers["WWW-Authenticate"].startswith("Bearer ")


async def test_an_inactive_session_is_the_agents_invalid_token() -> None:
    client, _ = ledger(lambda _: httpx.Response(409, json={"error": "session_inactive"}))
    with pytest.raises(LedgerRefused) as raised:
        await client.propose(CALLER, kind="order.place", summary="s")
    assert raised.value.refusal().status == 401
    assert raised.value.refusal().error == "invalid_token"


@pytest.mark.parametrize(("status", "code"), [(400, "invalid_request"), (404, "unknown_kind")])
async def test_the_companys_own_mistakes_are_500_for_the_agent(status: int, code: str) -> None:
    client, _ = ledger(lambda _: httpx.Response(status, json={"error": code}))
    with pytest.raises(LedgerRefused) as raised:
        await client.propose(CALLER, kind="nope", summary="s")
    assert (raised.value.code, raised.value.status) == (code, status)
    assert (raised.value.refusal().status, raised.value.refusal().error) == (500, "server_error")


async def test_a_refusal_without_a_json_body_is_still_typed() -> None:
    client, _ = ledger(lambda _: httpx.Response(404, text="<html>"))
    with pytest.raises(LedgerRefused) as raised:
        await client.get("op_1")
    assert (raised.value.code, raised.value.status) == ("refused", 404)


@pytest.mark.parametrize("answer", [
    httpx.Response(500), httpx.Response(502, text="bad gateway"), httpx.Response(200, text="not json"),
    httpx.Response(201, json={"no": "operation"}), httpx.Response(429), httpx.Response(302),
])
async def test_no_usable_answer_is_unavailable_and_503_for_the_agent(answer: httpx.Response) -> None:
    client, _ = ledger(lambda _: answer)
    with pytest.raises(LedgerUnavailable) as raised:
        await client.propose(CALLER, kind="order.place", summary="s")
    refusal = raised.value.refusal()
    assert (refusal.status, refusal.error, refusal.headers["Retry-After"]) == (503, "temporarily_unavailable", "2")


async def test_retry_after_is_honoured_and_capped() -> None:
    client, _ = ledger(lambda _: httpx.Response(503, headers={"Retry-After": "9999"}))
    with pytest.raises(LedgerUnavailable) as raised:
        await client.get("op_1")
    assert raised.value.retry_after == 300


async def test_unreachable_is_unavailable_and_the_credential_is_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client, _ = ledger(down)
    with caplog.at_level(logging.DEBUG), pytest.raises(LedgerUnavailable):
        await client.propose(CALLER, kind="order.place", summary="s")
    assert CREDENTIAL not in caplog.text
    assert CREDENTIAL not in repr(client)


async def test_a_refused_credential_is_a_configuration_error(caplog: pytest.LogCaptureFixture) -> None:
    client, _ = ledger(lambda _: httpx.Response(401, json={"error": "invalid_client"}))
    with caplog.at_level(logging.ERROR), pytest.raises(LedgerCredentialRefused) as raised:
        await client.get("op_1")
    assert isinstance(raised.value, LedgerError)
    assert raised.value.refusal().status == 500
    assert "credential" in caplog.text and CREDENTIAL not in caplog.text


async def test_revise_report_and_confirm_on_the_website() -> None:
    revised = {**OPERATION, "revision": 2}
    client, seen = ledger(lambda _: httpx.Response(200, json={"operation": revised}))
    assert await client.revise("op_1", summary="now 40.00", terms={"total": {"amount": "40.00"}}) == revised
    assert await client.report_outcome("op_1", "failed", "Nothing was charged", {"reason": "stock"}) == revised
    assert await client.confirm_on_website("op_1", 2, "ses_1") == revised
    assert [(r.method, str(r.url)) for r in seen] == [
        ("POST", f"{OPS}/op_1/revisions"), ("POST", f"{OPS}/op_1/outcome"), ("POST", f"{OPS}/op_1/confirm"),
    ]
    assert body_of(seen[0]) == {"summary": "now 40.00", "terms": {"total": {"amount": "40.00"}}}
    assert body_of(seen[1]) == {"outcome": "failed", "result": {"summary": "Nothing was charged",
                                                                "data": {"reason": "stock"}}}
    assert body_of(seen[2]) == {"revision": 2, "session_id": "ses_1"}


async def test_terms_changed_carries_the_current_operation() -> None:
    current = {**OPERATION, "revision": 3}
    client, _ = ledger(lambda _: httpx.Response(409, json={"error": "terms_changed", "operation": current}))
    with pytest.raises(LedgerRefused) as raised:
        await client.confirm_on_website("op_1", 2, "ses_1")
    assert raised.value.operation == current


async def test_bad_arguments_are_refused_before_any_request() -> None:
    client, seen = ledger(lambda _: httpx.Response(200, json={"operation": OPERATION}))
    with pytest.raises(ValueError, match="outcome"):
        await client.report_outcome("op_1", "maybe", "s")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="revision"):
        await client.confirm_on_website("op_1", 0, "ses_1")
    with pytest.raises(ValueError, match="operation_id"):
        await client.get("")
    with pytest.raises(ValueError, match="limit"):
        await client.list(limit=500)
    assert seen == []


async def test_get_decodes_the_details_and_encodes_the_id() -> None:
    client, seen = ledger(lambda _: httpx.Response(200, json={"operation": OPERATION, "details": DETAILS}))
    record = await client.get("op/1")
    assert str(seen[0].url) == f"{OPS}/op%2F1"
    assert record.operation == OPERATION
    assert (record.details.kind, record.details.account, record.details.input) == ("order.place", "acct_1",
                                                                                   {"cart": "7f3a"})
    assert record.details.created_at == datetime(2026, 11, 30, 10, tzinfo=UTC)


async def test_list_passes_filters_and_pages() -> None:
    client, seen = ledger(lambda _: httpx.Response(200, json={
        "items": [{"operation": OPERATION, "details": DETAILS}], "next_cursor": "c2"}))
    page = await client.list(state="proposed", account="acct_1", since=datetime(2026, 11, 1, tzinfo=UTC), limit=10)
    assert dict(seen[0].url.params) == {"state": "proposed", "account": "acct_1",
                                        "since": "2026-11-01T00:00:00+00:00", "limit": "10"}
    assert page.next_cursor == "c2"
    assert page.items[0].operation == OPERATION and page.items[0].details.kind == "order.place"


def test_the_ledger_url_and_credential_are_checked() -> None:
    for bad in ("http://ledger.example/acme", "https://ledger.example/acme/", "https://ledger.example/a?x=1"):
        with pytest.raises(ValueError, match="ledger_url"):
            FrontdoorLedger(bad, CREDENTIAL)
    with pytest.raises(ValueError, match="credential"):
        FrontdoorLedger(LEDGER, "")
    assert FrontdoorLedger("http://127.0.0.1:8002/demo", CREDENTIAL).ledger_url == "http://127.0.0.1:8002/demo"


async def test_a_confirm_still_in_progress_may_come_bare_with_202() -> None:
    in_progress = {**OPERATION, "state": "in_progress"}
    client, _ = ledger(lambda _: httpx.Response(202, json=in_progress, headers={"Retry-After": "2"}))
    assert await client.confirm_on_website("op_1", 1, "ses_1") == in_progress


async def test_a_pap10_caller_names_frontdoors_session_and_its_tokens_account() -> None:
    """ADR 0004 §9: a 1.0 proposal names the ``ses_`` Session and the access token's account."""
    client, seen = ledger(lambda _: httpx.Response(201, json={"operation": OPERATION}))
    signed_in = Caller(client_id=CLIENT_ID, user_id="usr_1", session_id="agent-sid-1", signed_in=True,
                       account="acct_1", scopes=frozenset({"orders:read"}), token_type="Bearer", profile="1.0",
                       frontdoor_session_id="ses_9")
    await client.propose(signed_in, kind="order.place", summary="s")
    assert body_of(seen[0])["caller"] == {"session_id": "ses_9", "client_id": CLIENT_ID, "user_id": "usr_1",
                                          "account": "acct_1"}
    signed_out = Caller(client_id=CLIENT_ID, user_id="usr_1", session_id="agent-sid-1", signed_in=False,
                        account=None, scopes=frozenset(), token_type=None, profile="1.0", frontdoor_session_id="ses_9")
    await client.propose(signed_out, kind="order.place", summary="s")
    assert body_of(seen[1])["caller"] == {"session_id": "ses_9", "client_id": CLIENT_ID, "user_id": "usr_1"}


def problem(status: int, code: str, detail: str, **extra: Any) -> httpx.Response:
    """The ledger's refusal as it is on the wire: RFC 9457 problem details."""
    return httpx.Response(status, headers={"Content-Type": "application/problem+json"}, content=json.dumps({
        "type": f"https://frontdoor.dev/problems/{code}", "title": "Conflict", "status": status, "code": code,
        "detail": detail, "request_id": "req_1", **extra}).encode())


async def test_a_problem_refusal_keeps_the_public_codes() -> None:
    client, _ = ledger(lambda _: problem(403, "extension_required", "The agent does not support the operations "
                                                                      "extension."))
    with pytest.raises(LedgerRefused) as raised:
        await client.propose(CALLER, kind="order.place", summary="s")
    error = raised.value
    assert (error.code, error.status) == ("extension_required", 403)
    assert error.description == "The agent does not support the operations extension."
    assert error.refusal().body["extension"] == "operations"  # the agent's answer names the extension
    assert error.body["request_id"] == "req_1"


async def test_a_problem_terms_changed_carries_the_current_operation_and_session_inactive_maps() -> None:
    current = {**OPERATION, "revision": 3}
    client, _ = ledger(lambda _: problem(409, "terms_changed", "The terms changed.", operation=current))
    with pytest.raises(LedgerRefused) as raised:
        await client.confirm_on_website("op_1", 2, "ses_1")
    assert (raised.value.code, raised.value.operation) == ("terms_changed", current)
    client, _ = ledger(lambda _: problem(409, "session_inactive", "That Session is not live."))
    with pytest.raises(LedgerRefused) as inactive:
        await client.propose(CALLER, kind="order.place", summary="s")
    assert (inactive.value.refusal().status, inactive.value.refusal().error) == (401, "invalid_token")


async def test_a_problem_credential_refusal_is_still_a_configuration_error() -> None:
    client, _ = ledger(lambda _: problem(401, "invalid_client", "Authenticate with a resource-server credential."))
    with pytest.raises(LedgerCredentialRefused):
        await client.get("op_1")
