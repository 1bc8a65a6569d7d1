"""The console's real Stripe gateway against localstripe (fronted by the stub for Checkout,
the Portal and meter events): customers, the Checkout upgrade, localstripe's own signed
webhook deliveries, invoices on the Billing page, the Portal, and Billing Meter events sent
once per identifier when the beat task runs twice, fails midway or dies before committing."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest
from frontdoor_billing import BillingConfig, GatewayError, count_closed_days, meter_identifier, report_usage
from frontdoor_core.ids import new_id
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle, sign_up
from tests.support.eventually import eventually
from tests.support.stripe_stub import StripeStub


async def _dashboard(client: AsyncTestClient[Any], email: str) -> str:
    """Sign in to the dashboard; a CSRF token for its forms."""
    client.cookies.clear()
    page = await client.get("/login")
    token = re.search(r'name="_csrf_token" value="([^"]+)"', page.text)
    assert token
    r = await client.post("/login", data={"email": email, "password": STRONG_PASSWORD, "_csrf_token": token.group(1)},
                          follow_redirects=False)
    assert r.status_code == 303, r.text
    home = await client.get("/billing")
    csrf = re.search(r'name="_csrf_token" value="([^"]+)"', home.text)
    assert csrf
    return csrf.group(1)


async def _plan(client: AsyncTestClient[Any], t: TenantHandle) -> str:
    r = await client.get("/api/v1/billing", headers=t.auth)
    assert r.status_code == 200, r.text
    return str(r.json()["plan"]["id"])


async def test_checkout_upgrade_through_localstripe(billed_console: AsyncTestClient[Any], webhook_console: str,
                                                    stripe_offline: StripeStub, db: Any) -> None:
    t = await sign_up(billed_console)
    other = await sign_up(billed_console)
    csrf = await _dashboard(billed_console, t.email)
    r = await billed_console.post("/billing/checkout", data={"_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303, r.text
    location = r.headers["location"]
    assert location.startswith(f"{stripe_offline.url}/pay/cs_test_")
    # the customer exists in localstripe, named for the tenant
    customer_id = await db.fetchval("SELECT stripe_customer_id FROM billing_accounts WHERE tenant_id = $1", t.id)
    customer = stripe_offline.upstream.client().v1.customers.retrieve(customer_id)
    assert customer.metadata["frontdoor_tenant_id"] == t.id and customer.email == t.email
    cs = stripe_offline.checkouts[location.rsplit("/", 1)[1]]
    assert cs.client_reference_id == t.id and cs.metadata == {"frontdoor_tenant_id": t.id, "frontdoor_plan": "growth"}

    # Pay on the (stub's) Checkout page: a localstripe subscription + a signed checkout.session.completed
    success = await asyncio.to_thread(stripe_offline.complete_checkout, cs.id)
    assert success.endswith("/billing?notice=upgraded")
    assert await _plan(billed_console, t) == "growth"
    assert await _plan(billed_console, other) == "free"  # another tenant's plan is its own

    # localstripe's own signed deliveries (customer.subscription.created, invoice.payment_succeeded) verify
    async def delivered() -> None:
        types = {r["type"] for r in await db.fetch("SELECT type FROM billing_stripe_events WHERE tenant_id = $1", t.id)}
        assert {"checkout.session.completed", "customer.subscription.created", "invoice.payment_succeeded"} <= types
    await eventually(delivered, timeout=15)
    account = await db.fetchrow("SELECT plan, stripe_subscription_id, subscription_status FROM billing_accounts"
                                " WHERE tenant_id = $1", t.id)
    assert account["plan"] == "growth" and account["subscription_status"] == "active"
    assert account["stripe_subscription_id"].startswith("sub_")

    # the Billing page lists localstripe's paid invoice (49.00 USD); the other tenant sees none
    page = await billed_console.get("/billing")
    assert page.status_code == 200 and 'id="invoices"' in page.text and "49.00 USD" in page.text
    assert re.search(r"<td>paid</td>", page.text)
    await _dashboard(billed_console, other.email)
    assert 'id="invoices"' not in (await billed_console.get("/billing")).text

    # the Portal (stub) for the tenant's own customer
    csrf = await _dashboard(billed_console, t.email)
    r = await billed_console.post("/billing/portal", data={"_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith(f"{stripe_offline.url}/portal/")
    assert stripe_offline.portal_sessions[-1]["customer"] == customer_id


async def test_an_unreachable_stripe_is_a_503_page(billed_settings: Settings, migrated: str, clock: Any) -> None:
    import msgspec
    from frontdoor_console.app import create_app

    s = msgspec.structs.replace(billed_settings, stripe_api_base="http://127.0.0.1:9")
    async with AsyncTestClient(create_app(s, clock=clock), base_url="https://console.frontdoor.test") as c:
        t = await sign_up(c)
        csrf = await _dashboard(c, t.email)
        r = await c.post("/billing/checkout", data={"_csrf_token": csrf}, follow_redirects=False)
        assert r.status_code == 503 and "Stripe is unavailable" in r.text


async def _growth_tenant_with_usage(db: Any, console: AsyncTestClient[Any], clock: Any, customer: str
                                    ) -> tuple[TenantHandle, Any]:
    t = await sign_up(console)
    day = clock() - timedelta(days=2)
    await db.execute("UPDATE tenants SET created_at = $2 WHERE id = $1", t.id, day - timedelta(days=1))
    await db.execute("INSERT INTO billing_accounts (tenant_id, plan, stripe_customer_id, updated_at)"
                     " VALUES ($1, 'growth', $2, now())", t.id, customer)
    for i in range(5):
        await db.execute("INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
                         " VALUES ($1, $2, $3, $4, $5, $5)", t.id, new_id("ses"), f"https://agent{i % 3}.example",
                         unique("u-"), day)
    return t, day.date()


class DiesBeforeCommit:
    """The real gateway, and then the worker dies: the meter event is sent, the row not marked."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway

    async def meter_event(self, **kw: Any) -> None:
        await self.gateway.meter_event(**kw)
        raise RuntimeError("worker died")


async def test_meter_events_once_per_identifier(billed_settings: Settings, billed_console: AsyncTestClient[Any],
                                                stripe_offline: StripeStub, runtime: Any, clock: Any, db: Any) -> None:
    config = BillingConfig.from_settings(billed_settings)
    assert config.gateway is not None
    customer = stripe_offline.upstream.client().v1.customers.create(params={"name": "metered"}).id
    t, day = await _growth_tenant_with_usage(db, billed_console, clock, customer)
    assert await count_closed_days(runtime.pool, config.catalogue, now=clock(), billed=True) >= 3
    mine = {m: meter_identifier(t.id, m, day) for m in ("sessions", "active_agents")}

    before = len(stripe_offline.meter_posts)
    # 1. dies after Stripe took the first event, before the commit: nothing is marked sent
    with pytest.raises(RuntimeError):
        await report_usage(runtime.pool, DiesBeforeCommit(config.gateway), config.catalogue,  # type: ignore[arg-type]
                           now=clock())
    assert len(stripe_offline.meter_posts) == before + 1
    died = stripe_offline.meter_posts[before]
    pending_sql = "SELECT count(*) FROM billing_usage_daily WHERE report = 'pending'"
    total = await db.fetchval(pending_sql)
    assert total >= 2
    # 2. Stripe fails midway (500 after one more event): what was sent is committed, the rest waits
    stripe_offline.fail_meter_events_after = before + 2
    try:
        assert await report_usage(runtime.pool, config.gateway, config.catalogue, now=clock()) == 1
    finally:
        stripe_offline.fail_meter_events_after = None
    assert await db.fetchval(pending_sql) == total - 1
    # 3. the next run catches up; 4. a run twice sends nothing
    assert await report_usage(runtime.pool, config.gateway, config.catalogue, now=clock()) >= 1
    assert await report_usage(runtime.pool, config.gateway, config.catalogue, now=clock()) == 0
    assert await db.fetchval("SELECT count(*) FROM billing_usage_daily WHERE tenant_id = $1 AND report = 'pending'",
                             t.id) == 0

    kept = stripe_offline.meter_events
    assert kept[mine["sessions"]].value == 5 and kept[mine["sessions"]].customer == customer
    assert kept[mine["sessions"]].event_name == "frontdoor_sessions"
    assert kept[mine["active_agents"]].value == 3
    assert {p for p in stripe_offline.meter_posts if p.startswith(t.id)} == set(mine.values())
    # only the event whose commit died was sent twice (Stripe kept it once); the rest once
    posts = stripe_offline.meter_posts[before:]
    assert [p for p in set(posts) if posts.count(p) > 1] == [died] and posts.count(died) == 2


async def test_meter_event_failure_is_a_gateway_error(billed_settings: Settings, stripe_offline: StripeStub) -> None:
    config = BillingConfig.from_settings(billed_settings)
    assert config.gateway is not None
    stripe_offline.fail_meter_events_after = 0
    try:
        with pytest.raises(GatewayError) as caught:
            from datetime import UTC, datetime

            await config.gateway.meter_event(event_name="frontdoor_sessions", identifier="x.sessions.2026-01-01",
                                             customer_id="cus_x", value=1, timestamp=datetime.now(UTC))
    finally:
        stripe_offline.fail_meter_events_after = None
    assert "sk_" not in str(caught.value)
