"""Billing at the wire: Stripe webhooks (forged, stale, replayed, out of order), 402 limits,
grace -> suspension -> paid, two tenants, billing off, and metering reported once."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec
import pytest
import stripe
from frontdoor_billing import BillingConfig, count_closed_days, report_usage, tenant_standing
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up

SECRET = "whsec_billing_tests_0123456789"


@pytest.fixture(scope="module")
async def billed(settings: Settings, migrated: str, clock: Any) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_console.app import create_app

    s = msgspec.structs.replace(settings, stripe_api_key="sk_test_billing", stripe_webhook_secret=SECRET,
                                stripe_api_base="http://127.0.0.1:9")
    async with AsyncTestClient(create_app(s, clock=clock), base_url="https://console.frontdoor.test") as c:
        yield c


def _event(event_id: str, event_type: str, obj: dict[str, Any], created: int) -> str:
    return json.dumps({"id": event_id, "object": "event", "created": created, "type": event_type,
                       "data": {"object": obj}, "livemode": False})


async def _post(c: AsyncTestClient[Any], payload: str, *, secret: str = SECRET, at: int | None = None) -> Any:
    header = stripe.WebhookSignature.generate_signature_header(payload, secret, timestamp=at)
    return await c.post("/billing/stripe/webhook", content=payload.encode(),
                        headers={"Stripe-Signature": header, "Content-Type": "application/json"})


async def _customer(runtime: Any, t: TenantHandle, customer: str) -> None:
    async with runtime.pool.acquire() as conn:
        await conn.execute("INSERT INTO billing_accounts (tenant_id, plan, stripe_customer_id, updated_at)"
                           " VALUES ($1, 'free', $2, now())", t.id, customer)


async def _billing(c: AsyncTestClient[Any], t: TenantHandle) -> dict[str, Any]:
    r = await c.get("/api/v1/billing", headers=t.auth)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


async def test_forged_stale_and_unsigned_events_are_refused(billed: AsyncTestClient[Any], runtime: Any) -> None:
    t = await sign_up(billed)
    await _customer(runtime, t, f"cus_{t.id}")
    now = int(time.time())
    payload = _event("evt_forged_" + t.id, "customer.subscription.created",
                     {"id": "sub_x", "customer": f"cus_{t.id}", "status": "active"}, now)
    assert (await _post(billed, payload, secret="whsec_someone_else")).status_code == 400
    assert (await _post(billed, payload, at=now - 600)).status_code == 400  # outside the 5 min tolerance
    r = await billed.post("/billing/stripe/webhook", content=payload.encode())
    assert r.status_code == 400 and r.json() == {"error": "invalid_signature"}
    # altered bytes after signing
    header = stripe.WebhookSignature.generate_signature_header(payload, SECRET)
    r = await billed.post("/billing/stripe/webhook", content=payload.replace("active", "trialing").encode(),
                          headers={"Stripe-Signature": header})
    assert r.status_code == 400
    assert (await _billing(billed, t))["plan"]["id"] == "free"
    async with runtime.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM billing_stripe_events WHERE id = $1",
                                   "evt_forged_" + t.id) == 0


async def test_replayed_and_out_of_order_events(billed: AsyncTestClient[Any], runtime: Any) -> None:
    t = await sign_up(billed)
    cus = f"cus_{t.id}"
    await _customer(runtime, t, cus)
    now = int(time.time())
    updated = _event(f"evt_u_{t.id}", "customer.subscription.updated", {"id": "sub_1", "customer": cus,
                                                                         "status": "active"}, now)
    r = await _post(billed, updated)
    assert r.status_code == 200 and r.json()["outcome"] == "applied"
    assert (await _post(billed, updated)).json()["outcome"] == "duplicate"  # replay
    deleted = _event(f"evt_d_{t.id}", "customer.subscription.deleted", {"id": "sub_1", "customer": cus,
                                                                         "status": "canceled"}, now + 10)
    assert (await _post(billed, deleted)).json()["outcome"] == "applied"
    # the older created event arrives last: recorded, changes nothing
    created = _event(f"evt_c_{t.id}", "customer.subscription.created", {"id": "sub_1", "customer": cus,
                                                                         "status": "active"}, now - 10)
    assert (await _post(billed, created)).json()["outcome"] == "stale"
    assert (await _billing(billed, t))["plan"]["id"] == "free"


async def test_checkout_then_failed_payment_grace_suspension_paid(
        billed: AsyncTestClient[Any], runtime: Any, clock: Any) -> None:
    t = await sign_up(billed)
    other = await sign_up(billed)
    cus = f"cus_{t.id}"
    now = int(time.time())
    done = _event(f"evt_cs_{t.id}", "checkout.session.completed", {
        "id": "cs_1", "object": "checkout.session", "mode": "subscription", "customer": cus, "subscription": "sub_9",
        "client_reference_id": t.id, "status": "complete", "payment_status": "paid"}, now)
    assert (await _post(billed, done)).json()["outcome"] == "applied"
    assert (await _billing(billed, t))["plan"]["id"] == "growth"
    assert (await _billing(billed, other))["plan"]["id"] == "free"  # another tenant is untouched
    # a company endpoint subscribed to billing.payment_failed
    r = await billed.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": "https://hooks.example.com/billing", "event_types": ["billing.payment_failed"]})
    assert r.status_code == 201, r.text
    failed = _event(f"evt_f_{t.id}", "invoice.payment_failed", {"id": "in_1", "customer": cus, "amount_due": 4900,
                                                                 "currency": "usd"}, now + 1)
    assert (await _post(billed, failed)).json()["outcome"] == "applied"
    body = await _billing(billed, t)
    assert body["status"] == "grace" and body["grace_until"]
    async with runtime.pool.acquire() as conn:
        msgs = await conn.fetch("SELECT body FROM webhook_messages WHERE tenant_id = $1 AND event_type = $2",
                                t.id, "billing.payment_failed")
        assert len(msgs) == 1 and json.loads(msgs[0]["body"])["data"]["invoice_id"] == "in_1"
        assert await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND event_type = $2",
                                   other.id, "billing.payment_failed") == 0
    config = BillingConfig.from_settings(msgspec.structs.replace(runtime.settings, stripe_api_key="sk_x",
                                                                  stripe_webhook_secret=SECRET))
    clock.advance(days=8)
    assert (await _billing(billed, t))["status"] == "suspended"
    async with runtime.pool.acquire() as conn:
        standing = await tenant_standing(conn, config, t.id, now=clock())
        assert standing.sessions_refused
    # suspended: new configuration held to Free's limits (1 endpoint, it has 1)
    r = await billed.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": "https://hooks.example.com/second", "event_types": ["operation.proposed"]})
    assert r.status_code == 402 and r.json()["code"] == "plan_limit_reached"
    assert r.json()["limit"] == "webhook_endpoints"
    paid = _event(f"evt_p_{t.id}", "invoice.paid", {"id": "in_1", "customer": cus}, now + 2)
    assert (await _post(billed, paid)).json()["outcome"] == "applied"
    assert (await _billing(billed, t))["status"] == "ok"
    r = await billed.post("/api/v1/webhook-endpoints", headers=t.auth, json={
        "url": "https://hooks.example.com/second", "event_types": ["operation.proposed"]})
    assert r.status_code == 201, r.text


async def test_free_allows_one_domain_then_402_naming_the_limit(billed: AsyncTestClient[Any]) -> None:
    t = await sign_up(billed)
    r = await billed.post("/api/v1/domains", headers=t.auth, json={"domain": f"{t.slug}.example.com"})
    assert r.status_code == 201, r.text
    r = await billed.post("/api/v1/domains", headers=t.auth, json={"domain": f"{t.slug}-2.example.com"})
    assert r.status_code == 402
    body = r.json()
    assert r.headers["content-type"].startswith("application/problem+json")
    assert body["code"] == "plan_limit_reached" and body["limit"] == "domains" and body["allowed"] == 1
    other = await sign_up(billed)  # another tenant's room is its own
    r = await billed.post("/api/v1/domains", headers=other.auth, json={"domain": f"{other.slug}.example.com"})
    assert r.status_code == 201


async def test_billing_off_is_unlimited(console: AsyncTestClient[Any]) -> None:
    t = await sign_up(console)
    for i in range(2):
        r = await console.post("/api/v1/domains", headers=t.auth, json={"domain": f"{t.slug}-{i}.example.com"})
        assert r.status_code == 201, r.text
    body = (await console.get("/api/v1/billing", headers=t.auth)).json()
    assert body["billing_enabled"] is False and body["status"] == "unlimited"
    assert (await console.post("/billing/stripe/webhook", content=b"{}")).status_code == 404


class RecordingStripe:
    """Stripe's meter events as Stripe keeps them: one per identifier, whatever is resent."""

    def __init__(self, crash_after: int | None = None) -> None:
        self.posts: list[str] = []
        self.kept: dict[str, int] = {}
        self.crash_after = crash_after

    async def meter_event(self, *, event_name: str, identifier: str, customer_id: str, value: int,
                          timestamp: Any) -> None:
        if self.crash_after is not None and len(self.posts) >= self.crash_after:
            raise RuntimeError("worker died")
        self.posts.append(identifier)
        self.kept.setdefault(identifier, value)


async def test_usage_reported_once_when_run_twice_or_crashing(runtime: Any, clock: Any,
                                                               console: AsyncTestClient[Any]) -> None:
    t = await sign_up(console)
    catalogue = BillingConfig.from_settings(runtime.settings).catalogue
    day = clock() - timedelta(days=2)
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE tenants SET created_at = $2 WHERE id = $1", t.id, day - timedelta(days=1))
        await conn.execute("INSERT INTO billing_accounts (tenant_id, plan, stripe_customer_id, updated_at)"
                           " VALUES ($1, 'growth', $2, now())", t.id, f"cus_{t.id}")
        for i in range(3):
            await conn.execute(
                "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
                " VALUES ($1, $2, $3, 'u1', $4, $4)", t.id, f"ses_b{i}{t.id[-6:]}", f"https://agent{i % 2}.example",
                day)
    assert await count_closed_days(runtime.pool, catalogue, now=clock(), billed=True) >= 3
    assert await count_closed_days(runtime.pool, catalogue, now=clock(), billed=True) == 0  # twice: nothing new
    async with runtime.pool.acquire() as conn:
        rows = {r["metric"]: r["value"] for r in await conn.fetch(
            "SELECT metric, value FROM billing_usage_daily WHERE tenant_id = $1 AND day = $2", t.id, day.date())}
    assert rows["sessions"] == 3 and rows["active_agents"] == 2
    crashing = RecordingStripe(crash_after=1)
    with pytest.raises(RuntimeError):
        await report_usage(runtime.pool, crashing, catalogue, now=clock())  # type: ignore[arg-type]
    stripe_side = RecordingStripe()
    stripe_side.kept = dict(crashing.kept)
    await report_usage(runtime.pool, stripe_side, catalogue, now=clock())  # type: ignore[arg-type]
    again = await report_usage(runtime.pool, stripe_side, catalogue, now=clock())  # type: ignore[arg-type]
    assert again == 0
    mine = {k: v for k, v in stripe_side.kept.items() if k.startswith(t.id)}
    assert mine[f"{t.id}.sessions.{day.date().isoformat()}"] == 3
    assert mine[f"{t.id}.active_agents.{day.date().isoformat()}"] == 2
    # each identifier sent at most once more than it was kept: the crashed one alone was resent
    assert all(stripe_side.posts.count(k) <= 1 for k in stripe_side.posts)
