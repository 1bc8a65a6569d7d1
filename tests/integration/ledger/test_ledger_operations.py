"""The operations ledger end to end: propose → confirm → perform webhook → outcome, and every OPS rule."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.conftest import unique
from tests.integration.ledger.conftest import Shop, operations_agent
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


async def signed_in(shop: Shop, agent: TestAgent, account: str | None = None) -> tuple[str, dict[str, Any]]:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, account or unique("acct_"))
    return user, tokens


async def proposed(shop: Shop, agent: TestAgent, **over: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    user, tokens = await signed_in(shop, agent)
    r = await shop.propose(tokens, agent, user, **over)
    assert r.status_code == 201, r.text
    return user, tokens, r.json()["operation"]


async def test_propose_then_read_performs_nothing(shop: Shop, agent: TestAgent) -> None:
    """OPS-3-03: a proposal is proposed, readable by its owner unchanged, and nothing is performed."""
    _, tokens, op = await proposed(shop, agent)
    assert op["state"] == "proposed" and op["revision"] == 1
    assert op["confirmation"] is None and op["result"] is None
    assert op["user_approval_required"] is True and op["expires_at"].endswith("Z")
    read = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.status_code == 200, read.text
    assert read.json() == op
    assert read.headers["cache-control"] == "no-store"
    assert shop.receiver.performed == {}


async def test_confirm_performs_once_and_answers_the_outcome(shop: Shop, agent: TestAgent) -> None:
    """OPS-3-02, OPS-6-02, OPS-6-05: confirmed, performed once through the signed webhook, succeeded."""
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["state"] == "succeeded"
    assert done["confirmation"]["revision"] == 1 and done["confirmation"]["approved_by"] == "user"
    assert done["result"]["summary"].startswith("Order")
    assert done["terms"] == op["terms"]
    assert shop.receiver.performed == {op["operation_id"]: 1}
    delivery = shop.receiver.deliveries[-1]
    assert delivery["type"] == "operation.perform"
    assert delivery["data"]["input"] == {"cart": "c-1"}
    assert delivery["data"]["operation"]["state"] == "in_progress"
    again = await shop.confirm(agent, tokens["access_token"], op)
    assert again.status_code == 200 and again.json() == done
    assert shop.receiver.performed == {op["operation_id"]: 1}


async def test_concurrent_confirms_perform_once(shop: Shop, agent: TestAgent) -> None:
    """OPS-6-02: ten confirms at once; one wins the compare-and-set, one webhook, the same answer for all."""
    _, tokens, op = await proposed(shop, agent)
    answers = await asyncio.gather(*(shop.confirm(agent, tokens["access_token"], op) for _ in range(10)))
    assert {a.status_code for a in answers} == {200}
    assert shop.receiver.performed == {op["operation_id"]: 1}
    final = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert final.json()["state"] == "succeeded"
    assert {a.json()["operation_id"] for a in answers} == {op["operation_id"]}


async def test_an_agent_without_the_extension_gets_no_operation(shop: Shop, web: MockWeb) -> None:
    """OPS-2-01: nothing is proposed for an agent that does not list the operations extension."""
    plain = operations_agent(web, extensions={})
    user, tokens = await signed_in(shop, plain)
    r = await shop.propose(tokens, plain, user)
    assert r.status_code == 403 and r.json()["code"] == "extension_required"
    listed = await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations", headers=shop.api)
    assert listed.json()["items"] == []


async def test_revised_terms_refuse_the_old_revision(shop: Shop, agent: TestAgent) -> None:
    """OPS-3.1-01: a revision is frozen; only the latest can be confirmed (409 terms_changed with it)."""
    _, tokens, op = await proposed(shop, agent)
    r = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/revisions", headers=shop.api,
                               json={"summary": "Order 2 x espresso beans (1 kg) for 41.00 EUR, delivered Friday",
                                     "terms": {"total": {"amount": "41.00", "currency": "EUR"}}})
    assert r.status_code == 200, r.text
    assert r.json()["operation"]["revision"] == 2
    old = await shop.confirm(agent, tokens["access_token"], op)
    assert old.status_code == 409, old.text
    assert old.json()["error"] == "terms_changed"
    current = old.json()["operation"]
    assert current["revision"] == 2 and current["terms"]["total"]["amount"] == "41.00"
    assert shop.receiver.performed == {}
    new = await shop.confirm(agent, tokens["access_token"], current)
    assert new.status_code == 200 and new.json()["state"] == "succeeded"
    history = await shop.console.get(f"/api/v1/operations/{op['operation_id']}", headers=shop.tenant.auth)
    assert [rev["terms"]["total"]["amount"] for rev in history.json()["revisions"]] == ["38.00", "41.00"]


async def test_standing_permission_cannot_confirm_what_needs_the_user(shop: Shop, agent: TestAgent) -> None:
    """OPS-5.1-05: user_approval_required refuses a standing permission (403), and it stays proposed."""
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op, approved_by="standing_permission")
    assert r.status_code == 403 and r.json()["error"] == "user_approval_required"
    read = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.json()["state"] == "proposed"


async def test_a_standing_permission_confirms_what_does_not_need_the_user(shop: Shop, agent: TestAgent) -> None:
    _, tokens, op = await proposed(shop, agent, user_approval_required=False)
    r = await shop.confirm(agent, tokens["access_token"], op, approved_by="standing_permission")
    assert r.status_code == 200 and r.json()["confirmation"]["approved_by"] == "standing_permission"


@pytest.mark.parametrize("body", [{}, {"revision": "1", "approved_by": "user"}, {"revision": 1, "approved_by": "me"},
                                  {"revision": True, "approved_by": "user"}, [1]])
async def test_a_malformed_confirm_is_invalid_request(shop: Shop, agent: TestAgent, body: Any) -> None:
    _, tokens, op = await proposed(shop, agent)
    r = await shop.agent(agent, tokens["access_token"], op["operation_id"], "confirm", body)
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"
    assert shop.receiver.performed == {}


async def test_missing_scope_is_insufficient_scope(console: Any, issuer: Any, ledger: Any, tenant: Any,
                                                   clock: ShiftableClock, store: Any, web: MockWeb,
                                                   agent: TestAgent) -> None:
    from tests.integration.ledger.conftest import make_shop

    shop = await make_shop(console, issuer, ledger, tenant, clock, store, web, scopes=["poppy:write"])
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"), scope="poppy:read")
    r = await shop.propose(tokens, agent, user)
    op = r.json()["operation"]
    refused = await shop.confirm(agent, tokens["access_token"], op)
    assert refused.status_code == 403 and refused.json()["error"] == "insufficient_scope"
    assert 'scope="poppy:write"' in refused.headers["www-authenticate"]


async def test_another_users_operation_is_an_unknown_one(shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    """OPS-3.2-01: another user's operation and an unknown ID get the same 404."""
    _, _, op = await proposed(shop, agent)
    _, other_tokens = await signed_in(shop, agent)
    stranger = operations_agent(web)
    _, stranger_tokens = await signed_in(shop, stranger)
    answers = [
        await shop.agent(agent, other_tokens["access_token"], op["operation_id"]),
        await shop.agent(agent, other_tokens["access_token"], "op_unknown_0000"),
        await shop.agent(stranger, stranger_tokens["access_token"], op["operation_id"]),
    ]
    assert {(a.status_code, a.json()["error"]) for a in answers} == {(404, "operation_not_found")}
    assert len({a.text for a in answers}) == 1


async def test_an_accounts_operation_needs_the_session_signed_in(shop: Shop, agent: TestAgent) -> None:
    user, _tokens, op = await proposed(shop, agent)
    signed_out = await shop.company.session(agent, user)
    r = await shop.agent(agent, signed_out["access_token"], op["operation_id"])
    assert r.status_code == 403 and r.json()["error"] == "sign_in_required"


async def test_cancel_a_proposal_then_a_late_confirm_changes_nothing(shop: Shop, agent: TestAgent) -> None:
    _, tokens, op = await proposed(shop, agent)
    cancelled = await shop.agent(agent, tokens["access_token"], op["operation_id"], "cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert cancelled.json()["result"]["summary"]
    late = await shop.confirm(agent, tokens["access_token"], op)
    assert late.status_code == 200 and late.json()["state"] == "cancelled" and late.json()["confirmation"] is None
    assert shop.receiver.performed == {}


async def test_an_unknown_outcome_stays_in_progress_until_the_company_reports(shop: Shop, agent: TestAgent) -> None:
    """OPS-6-01, OPS-6-03: a failing webhook leaves it in_progress with Retry-After, never failed."""
    shop.receiver.answer = "error"
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.status_code == 200 and r.json()["state"] == "in_progress"
    assert r.headers["retry-after"].isdigit()
    read = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.json()["state"] == "in_progress" and "retry-after" in read.headers
    cancel = await shop.agent(agent, tokens["access_token"], op["operation_id"], "cancel")
    assert cancel.json()["state"] == "in_progress"
    report = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
                                    headers=shop.api,
                                    json={"outcome": "succeeded", "result": {"summary": "Order 7 placed"}})
    assert report.status_code == 200 and report.json()["operation"]["state"] == "succeeded"
    conflict = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
                                      headers=shop.api,
                                      json={"outcome": "failed", "result": {"summary": "nothing"}})
    assert conflict.status_code == 409 and conflict.json()["code"] == "outcome_conflict"


async def test_an_unparseable_2xx_is_an_unknown_outcome(shop: Shop, agent: TestAgent) -> None:
    shop.receiver.answer = "garbage"
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.json()["state"] == "in_progress"
    messages = await shop.console.get(f"/api/v1/webhook-endpoints/{shop.endpoint_id}/messages",
                                      headers=shop.tenant.auth)
    perform = next(m for m in messages.json()["data"] if m["event_type"] == "operation.perform")
    assert perform["state"] == "pending"


async def test_accepted_then_reported(shop: Shop, agent: TestAgent) -> None:
    shop.receiver.answer = "accepted"
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.json()["state"] == "in_progress"
    assert shop.receiver.performed == {op["operation_id"]: 1}
    report = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/outcome",
                                    headers=shop.api, json={"outcome": "failed", "result": {
                                        "summary": "Refunded 38.00 EUR: the courier lost the parcel"}})
    assert report.json()["operation"]["state"] == "failed"
    read = await shop.agent(agent, tokens["access_token"], op["operation_id"])
    assert read.json()["state"] == "failed" and "retry-after" not in read.headers


async def test_a_failed_outcome_says_what_changed(shop: Shop, agent: TestAgent) -> None:
    shop.receiver.answer = "failed"
    _, tokens, op = await proposed(shop, agent)
    r = await shop.confirm(agent, tokens["access_token"], op)
    assert r.json()["state"] == "failed" and "Charged nothing" in r.json()["result"]["summary"]


async def test_a_lapsed_proposal_expires(shop: Shop, agent: TestAgent, clock: ShiftableClock) -> None:
    _, tokens, op = await proposed(shop, agent, expires_in=60)
    clock.advance(seconds=61)
    fresh = await shop.company.refresh(agent, tokens["refresh_token"], session_id=tokens["session_id"])
    token = fresh.json()["access_token"]
    read = await shop.agent(agent, token, op["operation_id"])
    assert read.json()["state"] == "expired" and read.json()["result"]["summary"]
    late = await shop.confirm(agent, token, op)
    assert late.status_code == 200 and late.json()["state"] == "expired"
    assert shop.receiver.performed == {}


async def test_the_same_action_is_the_same_operation(shop: Shop, agent: TestAgent) -> None:
    """OPS-4-01: an open operation with the same action key comes back (200), not a second one."""
    user, tokens = await signed_in(shop, agent)
    first = await shop.propose(tokens, agent, user, action_key="cart:c-1")
    second = await shop.propose(tokens, agent, user, action_key="cart:c-1")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json() == second.json()
    racing = await asyncio.gather(*(shop.propose(tokens, agent, user, action_key="cart:c-2") for _ in range(5)))
    assert len({r.json()["operation"]["operation_id"] for r in racing}) == 1


async def test_website_confirmation_is_the_same_compare_and_set(shop: Shop, agent: TestAgent) -> None:
    """Operations §4.4, OPS-6-02: confirmed on the company's page, then the agent's confirm changes nothing."""
    _, tokens, op = await proposed(shop, agent)
    r = await shop.ledger.post(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}/confirm", headers=shop.api,
                               json={"revision": 1, "session_id": tokens["session_id"]})
    assert r.status_code == 200, r.text
    assert r.json()["operation"]["state"] == "succeeded"
    again = await shop.confirm(agent, tokens["access_token"], op)
    assert again.json() == r.json()["operation"]
    assert shop.receiver.performed == {op["operation_id"]: 1}


async def test_the_ledger_api_needs_this_tenants_credential(shop: Shop, agent: TestAgent, console: Any,
                                                             issuer: Any, ledger: Any, other_tenant: Any,
                                                             clock: ShiftableClock, store: Any, web: MockWeb) -> None:
    from tests.integration.ledger.conftest import make_shop

    _, tokens, op = await proposed(shop, agent)
    other = await make_shop(console, issuer, ledger, other_tenant, clock, store, web)
    theirs = await ledger.get(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}", headers=other.api)
    assert theirs.status_code == 401
    mine_elsewhere = await ledger.get(f"/{other.tenant.slug}/v1/operations/{op['operation_id']}", headers=other.api)
    assert mine_elsewhere.status_code == 404
    # Another tenant's Session Token is no token here.
    r = await ledger.get(other.url(op["operation_id"]), headers={
        "Authorization": f"DPoP {tokens['access_token']}",
        "DPoP": agent.dpop("GET", other.url(op["operation_id"]), token=tokens["access_token"], iat=shop.now())})
    assert r.status_code == 401 and r.json()["error"] == "invalid_token"


async def test_the_perform_webhook_is_signed_and_keyed(shop: Shop, agent: TestAgent) -> None:
    shop.receiver.answer = "error"
    _, tokens, op = await proposed(shop, agent)
    await shop.confirm(agent, tokens["access_token"], op)
    assert shop.receiver.deliveries[-1]["data"]["idempotency_key"] == op["operation_id"]
    assert shop.receiver.webhook_ids[-1].startswith("msg_")


async def test_only_the_simulators_test_operation_is_marked_simulator_in_the_perform_data(
    shop: Shop, agent: TestAgent, db: Any,
) -> None:
    """The top-level ``"simulator": true`` says Frontdoor's agent simulator made it: a company's own input saying
    ``simulator`` is not enough; the Session's client_id must be the tenant's simulator's (`simulator_client_ids`)."""
    _, tokens, op = await proposed(shop, agent, input={"simulator": True})
    assert (await shop.confirm(agent, tokens["access_token"], op)).status_code == 200
    data = shop.receiver.deliveries[-1]["data"]
    assert data["input"] == {"simulator": True} and "simulator" not in data
    await db.execute("INSERT INTO simulator_client_ids (tenant_id, client_id, registered_at) VALUES ($1, $2, now())",
                     shop.tenant.id, agent.client_id)
    _, tokens, op = await proposed(shop, agent, input={"cart": "c-2"})  # its input does not say so
    assert (await shop.confirm(agent, tokens["access_token"], op)).status_code == 200
    assert "simulator" not in shop.receiver.deliveries[-1]["data"]
    _, tokens, op = await proposed(shop, agent, input={"simulator": True, "simulator_run": "sim_x"})
    assert (await shop.confirm(agent, tokens["access_token"], op)).status_code == 200
    data = shop.receiver.deliveries[-1]["data"]
    assert data["simulator"] is True and data["idempotency_key"] == op["operation_id"]


async def test_the_ledger_api_is_described(ledger: Any) -> None:
    r = await ledger.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    propose = doc["paths"]["/{slug}/v1/operations"]["post"]
    assert propose["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ProposeBody"}
    assert set(doc["components"]["schemas"]["ProposeBody"]["required"]) == {"kind", "caller", "summary"}
    assert "operation" in json.dumps(propose["responses"]["201"])


async def test_health_and_readiness(ledger: Any) -> None:
    assert (await ledger.get("/healthz")).status_code == 200
    ready = await ledger.get("/readyz")
    assert ready.status_code == 200, ready.text
