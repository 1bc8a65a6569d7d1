"""The upgrade journey in a real browser: the Billing page (Free) -> Upgrade -> Stripe
Checkout (the test stub's page, in front of localstripe) -> pay -> Stripe's signed
``checkout.session.completed`` reaches the console -> back on the Billing page, Growth.

The console runs here with billing on (``STRIPE_API_BASE`` at the stub), over a real
socket so that the stub and localstripe can deliver their signed webhooks to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest
from frontdoor_billing import load_plans
from frontdoor_core.settings import Settings
from playwright.async_api import expect

from tests.browser.test_browser_journeys import _sign_in, _sign_up, _tenant_id
from tests.support.stripe_stub import API_KEY, LocalStripe, StripeStub, free_port

pytestmark = pytest.mark.browser
SECRET = "whsec_browser_billing_0123456789"


@pytest.fixture(scope="module")
def stripe_offline() -> Iterator[StripeStub]:
    ls = LocalStripe().start()
    stub = StripeStub(upstream=ls).start()
    growth = load_plans(None).get("growth")
    client = ls.client()
    product = client.v1.products.create(params={"name": "Frontdoor Growth"})
    client.v1.plans.create(params={"id": str(growth.stripe_price), "product": product.id,
                                   "amount": growth.monthly_price, "currency": "usd", "interval": "month"})
    try:
        yield stub
    finally:
        stub.stop()
        ls.stop()


@pytest.fixture(scope="module")
async def billed_live_console(browser_settings: Settings, migrated: str, stripe_offline: StripeStub
                              ) -> AsyncIterator[str]:
    import uvicorn
    from frontdoor_console.app import create_app

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    s = msgspec.structs.replace(browser_settings, console_base_url=base, stripe_api_key=API_KEY,
                                stripe_webhook_secret=SECRET, stripe_api_base=stripe_offline.url)
    server = uvicorn.Server(uvicorn.Config(create_app(s), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the console did not start"
    stripe_offline.webhook_url, stripe_offline.webhook_secret = f"{base}/billing/stripe/webhook", SECRET
    stripe_offline.upstream.deliver_webhooks_to("console", f"{base}/billing/stripe/webhook", SECRET)
    try:
        yield base
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


async def test_upgrade_from_the_billing_page_through_checkout(browser: Any, billed_live_console: str,
                                                              stripe_offline: StripeStub, db: Any) -> None:
    ctx = await browser.new_context(base_url=billed_live_console, viewport={"width": 1280, "height": 860})
    ctx.set_default_timeout(30000)  # the pay step makes five localstripe calls and a signed POST: slow under load
    try:
        page = await ctx.new_page()
        _, email = await _sign_up(page)
        await _sign_in(page, email)
        await page.click("nav >> text=Billing")
        await expect(page.locator("#plan-name")).to_have_text("Free")
        await page.click("#upgrade")
        # Stripe Checkout (the stub's page)
        await page.wait_for_url(f"{stripe_offline.url}/pay/**")
        await expect(page.locator("h1")).to_have_text("Subscribe")
        await page.click("text=Pay and subscribe")
        # back on the Billing page once Stripe's signed event was accepted
        await page.wait_for_url(f"{billed_live_console}/billing?notice=upgraded")
        await expect(page.locator("#plan-name")).to_have_text("Growth")
        tenant_id = await _tenant_id(db, email)
        assert await db.fetchval("SELECT plan FROM billing_accounts WHERE tenant_id = $1", tenant_id) == "growth"
        assert await db.fetchval("SELECT count(*) FROM billing_stripe_events WHERE tenant_id = $1"
                                 " AND type = 'checkout.session.completed'", tenant_id) == 1
    finally:
        await ctx.close()
