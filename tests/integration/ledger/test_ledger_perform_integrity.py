"""The perform webhook's integrity: a final operation's perform is never sent again, an answer is
never settled without its consequence, an unreadable answer is flagged, and re-pricing follows
its endpoint's delivery rules. Each case below once went wrong (issue #12, items 3, 4 and 7)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import msgspec
import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_operations import ledger
from frontdoor_webhooks.sender import RESPONSE_LIMIT

from tests.integration.console.test_dashboard import sign_in
from tests.integration.console.test_operation_pages import (
    ScriptedSender,
    add_endpoint,
    add_kind,
    add_operation,
    deliver_once,
)
from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_reprice import propose, with_reprice
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

SUPERSEDED = "https://frontdoor.dev/problems/webhook_message_superseded"


async def _confirmed(shop: Shop, agent: TestAgent) -> tuple[dict[str, Any], dict[str, Any], httpx.Response]:
    tokens, op = await propose(shop, agent)
    return tokens, op, await shop.confirm(agent, tokens["access_token"], op)


async def _detail(shop: Shop, operation_id: str) -> dict[str, Any]:
    r = await shop.console.get(f"/api/v1/operations/{operation_id}", headers=shop.tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


async def _message(shop: Shop, message_id: str) -> dict[str, Any]:
    r = await shop.console.get(f"/api/v1/webhook-messages/{message_id}", headers=shop.tenant.auth)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


async def _redeliver_refused(shop: Shop, message_id: str) -> None:
    r = await shop.console.post(f"/api/v1/webhook-messages/{message_id}/redeliver", headers=shop.tenant.auth)
    assert r.status_code == 409, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "webhook_message_superseded" and r.json()["type"] == SUPERSEDED


# ---------------------------------------------------------------- item 3: never sent again


async def test_a_delivered_perform_of_a_final_operation_is_never_sent_again(shop: Shop, agent: TestAgent,
                                                                           runtime: Runtime, db: Any) -> None:
    """OPS-6-02: the perform was answered with its outcome; no redelivery may perform it twice."""
    from frontdoor_webhooks.delivery import claim

    _, op, r = await _confirmed(shop, agent)
    assert r.json()["state"] == "succeeded"
    message_id = (await _detail(shop, op["operation_id"]))["perform_message_id"]
    await _redeliver_refused(shop, message_id)
    message = (await _message(shop, message_id))["message"]
    assert message["state"] == "delivered" and message["superseded_at"] is not None  # what delivery did is kept
    async with runtime.pool.acquire() as conn:
        assert await claim(conn, message_id, runtime.clock(), timedelta(seconds=30)) is None
    assert len(shop.receiver.deliveries) == 1 and shop.receiver.webhook_ids == [message_id]

    # The dashboard offers no button, and its URLs refuse as the API does.
    csrf = await sign_in(shop.console, shop.tenant.email)
    page = await shop.console.get(f"/operations/{op['operation_id']}")
    assert page.status_code == 200 and 'id="op-state">succeeded' in page.text
    assert f"/operations/{op['operation_id']}/redeliver" not in page.text and 'id="superseded"' in page.text
    page = await shop.console.get(f"/webhooks/messages/{message_id}")
    assert page.status_code == 200
    assert f"/webhooks/messages/{message_id}/redeliver" not in page.text and 'id="superseded"' in page.text
    for path in (f"/operations/{op['operation_id']}/redeliver", f"/webhooks/messages/{message_id}/redeliver"):
        assert (await shop.console.get(path)).status_code == 409, path
        posted = await shop.console.post(path, data={"confirm": "yes", "_csrf_token": csrf}, follow_redirects=False)
        assert posted.status_code == 409, path
    shop.console.cookies.clear()
    assert not await db.fetch("SELECT 1 FROM audit_log WHERE tenant_id = $1 AND action = 'webhook_message.redelivered'",
                              shop.tenant.id)
    assert len(shop.receiver.deliveries) == 1


async def test_an_accepted_perform_reported_later_is_never_sent_again(shop: Shop, agent: TestAgent) -> None:
    """A 202 (delivered), then the outcome through the API: the message is superseded as the outcome lands."""
    shop.receiver.answer = "accepted"
    _, op, r = await _confirmed(shop, agent)
    assert r.json()["state"] == "in_progress"
    message_id = (await _detail(shop, op["operation_id"]))["perform_message_id"]
    before = (await _message(shop, message_id))["message"]
    assert before["state"] == "delivered" and before["superseded_at"] is None
    report = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
                                    headers=shop.api, json={"outcome": "succeeded",
                                                            "result": {"summary": "Order 7 placed"}})
    assert report.status_code == 200, report.text
    after = (await _message(shop, message_id))["message"]
    assert after["state"] == "delivered" and after["superseded_at"] is not None
    await _redeliver_refused(shop, message_id)
    assert shop.receiver.webhook_ids == [message_id]


async def test_recovery_leaves_a_final_operations_perform_out(shop: Shop, agent: TestAgent, web: MockWeb,
                                                              runtime: Runtime, clock: ShiftableClock) -> None:
    from frontdoor_webhooks.recoveries import run_recoveries

    sent: list[str] = []

    async def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["webhook-id"])
        return httpx.Response(409, headers={"webhook-delivery": "abort"})

    web.handle(f"https://{shop.tenant.slug}.shop.example/webhooks/frontdoor", refuse)
    since = clock().isoformat()
    _, op, r = await _confirmed(shop, agent)
    assert r.json()["state"] == "in_progress"
    detail = await _detail(shop, op["operation_id"])
    assert detail["attention_reason"] == "delivery_aborted"
    report = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
                                    headers=shop.api, json={"outcome": "failed",
                                                            "result": {"summary": "Nothing was charged"}})
    assert report.status_code == 200, report.text
    job = await shop.console.post(f"/api/v1/webhook-endpoints/{shop.endpoint_id}/recover",
                                  headers=shop.tenant.auth, json={"since": since})
    assert job.status_code == 202, job.text
    await run_recoveries(runtime.pool, clock, budget_s=5)
    progress = await shop.console.get(f"/api/v1/webhook-recoveries/{job.json()['id']}", headers=shop.tenant.auth)
    assert progress.json()["state"] == "done" and progress.json()["requeued"] == 0
    message = (await _message(shop, detail["perform_message_id"]))["message"]
    assert message["state"] == "superseded" and message["superseded_at"] is not None
    assert sent == [detail["perform_message_id"]]


# ---------------------------------------------------------------- item 4: one transaction


async def test_an_answer_is_never_settled_without_its_outcome(console: Any, tenant: Any, runtime: Runtime,
                                                             clock: ShiftableClock,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between settling the attempt and recording the outcome must not leave the
    operation in_progress with its message delivered: neither is written, and the retry records it."""
    kind = await add_kind(console, tenant, await add_endpoint(console, tenant))
    op = await add_operation(runtime, tenant.id, kind, confirm=True)
    assert op.perform_message_id is not None
    company = ScriptedSender((200, b'{"outcome": "succeeded", "result": {"summary": "Order 1043 placed"}}'))

    async def crash(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionResetError("the database went away")

    monkeypatch.setattr(ledger, "record_outcome", crash)
    with pytest.raises(ConnectionResetError):
        await deliver_once(runtime, op.perform_message_id, company)
    async with runtime.pool.acquire() as conn:
        message = await conn.fetchrow("SELECT state, delivered_at, locked_until FROM webhook_messages"
                                      " WHERE tenant_id = $1 AND id = $2", tenant.id, op.perform_message_id)
        attempts = await conn.fetchval("SELECT count(*) FROM webhook_attempts WHERE tenant_id = $1"
                                       " AND message_id = $2", tenant.id, op.perform_message_id)
        current = await ledger.get_operation(conn, tenant.id, op.id)
    assert message["state"] == "pending" and message["delivered_at"] is None and attempts == 0
    assert current is not None and current.state == "in_progress"

    monkeypatch.undo()
    assert await deliver_once(runtime, op.perform_message_id, company) is None  # its lease still holds it
    clock.advance(seconds=31)  # the lease (30 s) ends: the message is claimed and sent again
    report = await deliver_once(runtime, op.perform_message_id, company)
    assert report is not None and report.state == "delivered"
    async with runtime.pool.acquire() as conn:
        current = await ledger.get_operation(conn, tenant.id, op.id)
    assert current is not None and current.state == "succeeded" and current.result == {"summary": "Order 1043 placed"}
    assert company.sent == [op.perform_message_id, op.perform_message_id]  # the same webhook-id, again


# ---------------------------------------------------------------- item 4: unreadable answers


def _padded(size: int) -> bytes:
    """A valid outcome answer of exactly ``size`` bytes (padding inside ``result.data``)."""
    def body(pad: str) -> bytes:
        return msgspec.json.encode({"outcome": "succeeded", "result": {"summary": "Order 9 placed",
                                                                       "data": {"pad": pad}}})
    return body("x" * (size - len(body(""))))


def _answer(shop: Shop, web: MockWeb, *answers: httpx.Response) -> list[str]:
    """The shop's perform webhook answers these in turn (the last repeats); answers the webhook-ids seen."""
    seen: list[str] = []
    queue = list(answers)

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["webhook-id"])
        return queue.pop(0) if len(queue) > 1 else queue[0]

    web.handle(f"https://{shop.tenant.slug}.shop.example/webhooks/frontdoor", handler)
    return seen


async def test_an_outcome_exactly_at_the_size_cap_is_recorded(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    body = _padded(RESPONSE_LIMIT)
    assert len(body) == RESPONSE_LIMIT
    _answer(shop, web, httpx.Response(200, content=body, headers={"content-type": "application/json"}))
    _, _, r = await _confirmed(shop, agent)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    assert r.json()["result"]["summary"] == "Order 9 placed"


@pytest.mark.parametrize(("status", "body", "problem"), [
    (200, _padded(RESPONSE_LIMIT + 1), "answer_truncated"),  # over the cap: cut, so never read
    (202, _padded(RESPONSE_LIMIT + 500), "answer_truncated"),
    (200, b'{"outcome": "succeeded", "result": {"summary": "Order 9 pl', "answer_not_json"),  # truncated JSON
    (200, b'{"outcome": true, "result": {"summary": 42}}', "answer_invalid_outcome"),  # wrong types
    (201, b'{"order": "A-1"}', "answer_without_outcome"),
])
async def test_an_unreadable_2xx_answer_is_flagged_and_retried(shop: Shop, agent: TestAgent, web: MockWeb,
                                                               status: int, body: bytes, problem: str) -> None:
    """OPS-6-03: the outcome stays unknown (in_progress, never failed), and the flag says why."""
    seen = _answer(shop, web, httpx.Response(status, content=body, headers={"content-type": "application/json"}))
    _, op, r = await _confirmed(shop, agent)
    assert r.status_code == 200 and r.json()["state"] == "in_progress" and r.json()["result"] is None
    detail = await _detail(shop, op["operation_id"])
    assert detail["needs_attention"] is True and detail["attention_reason"] == problem
    company = await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}", headers=shop.api)
    assert company.json()["details"]["attention_reason"] == problem
    message = await _message(shop, detail["perform_message_id"])
    assert message["message"]["state"] == "pending" and message["message"]["next_attempt_at"] is not None
    [attempt] = message["attempts"]
    assert attempt["response_status"] == status and attempt["error_class"] == "invalid_response"
    assert seen == [detail["perform_message_id"]]


async def test_the_flag_shows_on_the_dashboard_and_a_later_answer_lifts_it(
        shop: Shop, agent: TestAgent, web: MockWeb, runtime: Runtime, clock: ShiftableClock, settings: Any) -> None:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_operations.perform import perform_message
    from frontdoor_tenancy.credentials import Kek
    from frontdoor_webhooks import DeliveryPolicy, SafeSender

    seen = _answer(shop, web, httpx.Response(200, content=b"<html>OK</html>"), httpx.Response(202))
    _, op, r = await _confirmed(shop, agent)
    assert r.json()["state"] == "in_progress"
    csrf = await sign_in(shop.console, shop.tenant.email)
    assert csrf
    page = await shop.console.get(f"/operations/{op['operation_id']}")
    problem = re.search(r'<p class="attention" id="answer-problem">(.*?)</p>', page.text, re.S)
    assert problem is not None and "answer_not_json" in problem.group(1)
    shop.console.cookies.clear()

    clock.advance(minutes=10)  # the retry is due; the dispatcher's worker makes it
    report = await perform_message(runtime.pool, runtime.redis, seen[0], sender=SafeSender(SafeFetcher(transport=web)),
                                   kek=Kek.from_env_value(settings.kek), clock=clock,
                                   policy=DeliveryPolicy.from_settings(settings))
    assert report is not None and report.state == "delivered" and seen == [seen[0], seen[0]]
    detail = await _detail(shop, op["operation_id"])
    assert detail["operation"]["state"] == "in_progress" and detail["needs_attention"] is False


# ---------------------------------------------------------------- item 7: re-price follows delivery rules


async def _reprice_endpoint(shop: Shop) -> str:
    kinds = await shop.console.get("/api/v1/operation-kinds", headers=shop.tenant.auth)
    return next(k["reprice_endpoint_id"] for k in kinds.json()["data"] if k["name"] == shop.kind)  # type: ignore[no-any-return]


async def test_a_disabled_reprice_endpoint_answers_the_confirm_503(shop: Shop, agent: TestAgent,
                                                                  web: MockWeb) -> None:
    asked = await with_reprice(shop, web, httpx.Response(200, json={"summary": "unused"}))
    reprice_endpoint = await _reprice_endpoint(shop)
    disabled = await shop.console.post(f"/api/v1/webhook-endpoints/{reprice_endpoint}/disable",
                                       headers=shop.tenant.auth)
    assert disabled.status_code == 200, disabled.text
    tokens, op = await propose(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable"
    assert r.headers["retry-after"] == "60"  # as while the perform endpoint is disabled
    assert asked == [] and shop.receiver.performed == {}
    assert (await shop.agent(agent, tokens["access_token"], op["operation_id"])).json()["state"] == "proposed"


async def test_reprice_counts_against_the_endpoints_rate_limit(shop: Shop, agent: TestAgent, web: MockWeb,
                                                               runtime: Runtime) -> None:
    asked = await with_reprice(shop, web, lambda payload: httpx.Response(200, json={
        "summary": payload["data"]["operation"]["summary"], "terms": payload["data"]["operation"]["terms"]}))
    endpoint = await _reprice_endpoint(shop)
    changed = await shop.console.post(f"/api/v1/webhook-endpoints/{endpoint}", headers=shop.tenant.auth,
                                      json={"rate_limit_per_second": 1})
    assert changed.status_code == 200, changed.text

    tokens, op = await propose(shop, agent)
    assert (await shop.confirm(agent, tokens["access_token"], op)).json()["state"] == "succeeded"
    assert len(asked) == 1
    # The call was counted in the endpoint's delivery counter (webhook_rate_windows, ADR 0006: one
    # window per endpoint shared by the deliverers and the ledger's fast path).
    used = await runtime.pool.fetchval("SELECT used FROM webhook_rate_windows WHERE endpoint_id = $1", endpoint)
    assert used is not None and used >= 1

    # The endpoint's deliveries took the next seconds' budget: the confirm is refused, not sent over the limit.
    await runtime.pool.execute(
        "UPDATE webhook_rate_windows SET window_start = date_trunc('second', clock_timestamp()) + interval '10 seconds',"
        " used = 1 WHERE endpoint_id = $1", endpoint)
    tokens, op = await propose(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable"
    assert int(r.headers["retry-after"]) >= 1
    assert len(asked) == 1
    assert (await shop.agent(agent, tokens["access_token"], op["operation_id"])).json()["state"] == "proposed"


async def test_two_tenants_final_performs(shop: Shop, agent: TestAgent) -> None:
    """Another tenant cannot redeliver (or see) this tenant's superseded perform message."""
    from tests.integration.conftest import sign_up

    _, op, r = await _confirmed(shop, agent)
    assert r.json()["state"] == "succeeded"
    message_id = (await _detail(shop, op["operation_id"]))["perform_message_id"]
    other = await sign_up(shop.console)
    theirs = await shop.console.post(f"/api/v1/webhook-messages/{message_id}/redeliver", headers=other.auth)
    assert theirs.status_code == 404 and theirs.json()["code"] == "webhook_message_not_found"


async def test_an_answer_and_a_reported_outcome_at_once_do_not_deadlock(console: Any, tenant: Any, runtime: Runtime,
                                                                        settings: Any) -> None:
    """Settling an answer locks its message, then records the outcome (the operation); the company's
    report of the same outcome at that moment must take the two locks in the same order, or one of
    the two transactions is killed as a deadlock (a lost answer, or a 500 to the company)."""
    import asyncio
    import json

    import asyncpg

    kind = await add_kind(console, tenant, await add_endpoint(console, tenant))
    op = await add_operation(runtime, tenant.id, kind, confirm=True)
    outcome = {"outcome": "succeeded", "result": {"summary": "Order 1044 placed"}}

    async def connect() -> asyncpg.Connection:
        conn = await asyncpg.connect(settings.database_url)
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        return conn

    settling, reporting = await connect(), await connect()
    try:
        async with settling.transaction():
            # The delivery engine's settle: the message row first (as `_settle` writes it)...
            await settling.execute("UPDATE webhook_messages SET last_status = 200 WHERE tenant_id = $1 AND id = $2",
                                   tenant.id, op.perform_message_id)
            report = asyncio.create_task(ledger.record_outcome(reporting, tenant.id, op.id, now=runtime.clock(),
                                                               **outcome))
            pid = reporting.get_server_pid()
            for _ in range(200):  # until the company's report waits for a lock
                if await runtime.pool.fetchval("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1",
                                               pid):
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError("the report never waited for the settle")
            # ...then the answer's outcome, in the same transaction.
            _, changed = await ledger.record_outcome(settling, tenant.id, op.id, now=runtime.clock(), **outcome)
        assert changed is True
        _, again = await asyncio.wait_for(report, 10)
        assert again is False  # the same outcome, reported once more: accepted, nothing changed
    finally:
        await settling.close()
        await reporting.close()
