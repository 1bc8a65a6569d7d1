"""A failed payment end to end, as a company's agents see it at the issuer: grace (nothing
refused) -> the grace period ends unpaid (new Sessions refused with the protocol's error,
503 ``temporarily_unavailable`` with ``Retry-After``; new configuration held to Free) ->
the invoice is paid (both lifted). Existing Sessions renew, sign-in on an existing
Session, refresh, introspection and operations under way keep working throughout; another
tenant is untouched.
The tenant's billing account is read once per cache period, not once per new Session."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest
import stripe
from frontdoor_core.settings import Settings
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient

from tests.integration.billing.conftest import SECRET
from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.ledger.conftest import LEDGER, make_shop, operations_agent
from tests.integration.signin.conftest import Company, make_company, new_agent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

GRACE = timedelta(minutes=10)


@pytest.fixture(scope="module")
async def short_grace_console(billed_settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                              ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_console.app import create_app
    from frontdoor_core.outbound import SafeFetcher

    s = msgspec.structs.replace(billed_settings, billing_grace_period=GRACE)
    async with AsyncTestClient(create_app(s, clock=clock, fetcher=SafeFetcher(transport=web)),
                               base_url="https://console.frontdoor.test") as c:
        yield c


async def _stripe_event(console: AsyncTestClient[Any], event_id: str, event_type: str, obj: dict[str, Any],
                        created: int) -> str:
    import json

    payload = json.dumps({"id": event_id, "object": "event", "created": created, "type": event_type,
                          "data": {"object": obj}, "livemode": False})
    r = await console.post("/billing/stripe/webhook", content=payload.encode(), headers={
        "Stripe-Signature": stripe.WebhookSignature.generate_signature_header(payload, SECRET)})
    assert r.status_code == 200, r.text
    return str(r.json()["outcome"])


async def _new_session(company: Company, agent: Any, user: str) -> Any:
    now = company.now()
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "assertion": agent.session_assertion(company.tenant.issuer, user, iat=now, exp=now + 120)}
    return await company.post_token(agent, form)


async def test_failed_payment_grace_suspension_paid_at_the_issuer(
        short_grace_console: AsyncTestClient[Any], billed_issuer: AsyncTestClient[Any], clock: ShiftableClock,
        runtime: Any, web: MockWeb, db: Any) -> None:
    console = short_grace_console
    store = DeviceStore(runtime.redis, clock=clock)
    t = await sign_up(console)
    other: TenantHandle = await sign_up(console)
    company = await make_company(console, billed_issuer, t, clock, store)
    theirs = await make_company(console, billed_issuer, other, clock, store)
    admission = billed_issuer.app.state.session_admission
    agent = new_agent(web)
    cus = f"cus_{t.id}"
    await db.execute("INSERT INTO billing_accounts (tenant_id, plan, stripe_customer_id, updated_at)"
                     " VALUES ($1, 'growth', $2, now())", t.id, cus)
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": "https://hooks.example.com/a", "event_types": ["operation.proposed"]})
    assert r.status_code == 201, r.text

    # before: a signed-in user (Session + Account Token) and a signed-out Session
    alice = await company.sign_in(agent, "alice", "acct-alice")
    bob = await company.session(agent, "bob")
    carol = await company.session(agent, "carol")

    # the payment fails: grace, nothing refused
    now = int(time.time())
    assert await _stripe_event(console, f"evt_f_{t.id}", "invoice.payment_failed",
                               {"id": "in_1", "customer": cus, "amount_due": 4900, "currency": "usd"}, now) == "applied"
    assert (await _new_session(company, agent, "dave")).status_code == 200

    # the grace period ends unpaid (and the issuer's cached read of the account expires)
    clock.advance(minutes=11)
    sessions_before = await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1", t.id)
    reads_before = admission.reads
    for user in ("erin", "frank", "gina"):
        r = await _new_session(company, agent, user)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "temporarily_unavailable"
        assert r.headers["retry-after"] == "3600" and r.headers["cache-control"] == "no-store"
        assert "billing" not in r.text.lower() and "invoice" not in r.text.lower()  # nothing about the company's bill
    assert admission.reads - reads_before == 1  # one account read for three refusals: cached
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1", t.id) == sessions_before
    # ... but what exists keeps working: a renewal, refresh, introspection, a sign-in on an existing Session
    assert (await company.session(agent, "bob", session_id=bob["session_id"]))["session_id"] == bob["session_id"]
    refreshed = await company.refresh(agent, alice["refresh_token"], session_id=alice["session_id"])
    assert refreshed.status_code == 200, refreshed.text
    state = await company.introspect(refreshed.json()["access_token"])
    assert state["active"] is True and state["signed_in"] is True
    signed = await company.sign_in(agent, "carol", "acct-carol", session_id=carol["session_id"])
    assert signed["signed_in"] is True and signed["session_id"] == carol["session_id"]
    # another tenant is not suspended
    assert (await _new_session(theirs, agent, "zoe")).status_code == 200
    # new configuration is held to Free's limits (1 endpoint; it has 1)
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": "https://hooks.example.com/b", "event_types": ["operation.proposed"]})
    assert r.status_code == 402 and r.json()["limit"] == "webhook_endpoints"
    assert (await console.get("/api/v1/billing", headers=t.auth)).json()["status"] == "suspended"

    # paid: both lifted (the issuer sees it once its cached read expires, 30 s)
    assert await _stripe_event(console, f"evt_p_{t.id}", "invoice.paid", {"id": "in_1", "customer": cus},
                               now + 1) == "applied"
    assert (await console.get("/api/v1/billing", headers=t.auth)).json()["status"] == "ok"
    clock.advance(seconds=31)
    r = await _new_session(company, agent, "erin")
    assert r.status_code == 200, r.text
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": "https://hooks.example.com/b", "event_types": ["operation.proposed"]})
    assert r.status_code == 201, r.text


async def test_billing_off_issuer_never_reads_accounts(issuer: AsyncTestClient[Any], console: AsyncTestClient[Any],
                                                       clock: ShiftableClock, runtime: Any, web: MockWeb,
                                                       db: Any) -> None:
    """Billing off (no Stripe): a tenant whose account says suspended still starts Sessions, no query paid."""
    t = await sign_up(console)
    company = await make_company(console, issuer, t, clock, DeviceStore(runtime.redis, clock=clock))
    await db.execute("INSERT INTO billing_accounts (tenant_id, plan, payment_failed_at, grace_until, updated_at)"
                     " VALUES ($1, 'growth', now() - interval '30 days', now() - interval '20 days', now())", t.id)
    assert (await _new_session(company, new_agent(web), "u")).status_code == 200
    assert issuer.app.state.session_admission.reads == 0


@pytest.fixture(scope="module")
async def billed_ledger(billed_settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                        ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    async with AsyncTestClient(create_app(billed_settings, clock=clock, fetcher=SafeFetcher(transport=web)),
                               base_url=LEDGER) as c:
        yield c


async def test_operations_under_way_finish_while_suspended(
        short_grace_console: AsyncTestClient[Any], billed_issuer: AsyncTestClient[Any],
        billed_ledger: AsyncTestClient[Any], clock: ShiftableClock, runtime: Any, web: MockWeb, db: Any) -> None:
    t = await sign_up(short_grace_console)
    shop = await make_shop(short_grace_console, billed_issuer, billed_ledger, t, clock,
                           DeviceStore(runtime.redis, clock=clock), web)
    agent = operations_agent(web)
    tokens = await shop.company.sign_in(agent, "olga", "acct-olga")
    r = await shop.propose(tokens, agent, "olga")
    assert r.status_code == 201, r.text
    op = r.json()["operation"]
    # the grace period of an unpaid invoice has ended (and the issuer's cached read expires)
    await db.execute("INSERT INTO billing_accounts (tenant_id, plan, stripe_customer_id, payment_failed_at,"
                     " grace_until, updated_at) VALUES ($1, 'growth', $2, $3, $4, now()) ON CONFLICT (tenant_id) DO UPDATE"
                     " SET plan = 'growth', stripe_customer_id = $2, payment_failed_at = $3, grace_until = $4", t.id, f"cus_{t.id}",
                     clock() - timedelta(days=8), clock() - timedelta(days=1))
    clock.advance(seconds=31)
    assert (await _new_session(shop.company, agent, "newcomer")).status_code == 503
    # the operation proposed before is confirmed and performed; the signed-in user proposes again
    done = await shop.confirm(agent, tokens["access_token"], op)
    assert done.status_code == 200 and done.json()["state"] == "succeeded", done.text
    assert shop.receiver.performed == {op["operation_id"]: 1}
    again = await shop.propose(tokens, agent, "olga")
    assert again.status_code == 201, again.text
