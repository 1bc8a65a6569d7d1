"""Billing on, against Stripe offline: localstripe (a subprocess) behind the stub.

``stripe_offline``: localstripe on a free port, the Growth plan created in it under the id
``plans.toml`` names as Growth's price, the stub (`tests.support.stripe_stub`) in front.
``billed_console``: the console in-process with ``STRIPE_API_BASE`` at the stub (every call
of the app's gateway goes there). ``webhook_console``: a second console process-alike,
over a real socket, where localstripe delivers its own signed events and the stub posts
``checkout.session.completed`` (two console instances share the database, like replicas).
``billed_issuer``: the issuer with billing on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest
from frontdoor_billing import load_plans
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.stripe_stub import API_KEY, LocalStripe, StripeStub, free_port

SECRET = "whsec_billing_offline_0123456789"


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
def billed_settings(settings: Settings, stripe_offline: StripeStub) -> Settings:
    return msgspec.structs.replace(settings, stripe_api_key=API_KEY, stripe_webhook_secret=SECRET,
                                   stripe_api_base=stripe_offline.url)


@pytest.fixture(scope="session")
async def billed_console(billed_settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                         ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_console.app import create_app
    from frontdoor_core.outbound import SafeFetcher

    app = create_app(billed_settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
        yield client


@pytest.fixture(scope="session")
async def webhook_console(billed_settings: Settings, migrated: str, clock: ShiftableClock,
                          stripe_offline: StripeStub) -> AsyncIterator[str]:
    """The console over a real socket; localstripe and the stub deliver Stripe's webhooks to it."""
    import uvicorn
    from frontdoor_console.app import create_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(billed_settings, clock=clock), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the console did not start"
    url = f"http://127.0.0.1:{port}/billing/stripe/webhook"
    stripe_offline.upstream.deliver_webhooks_to("console", url, SECRET)
    stripe_offline.webhook_url, stripe_offline.webhook_secret = url, SECRET
    try:
        yield url
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


@pytest.fixture(scope="session")
async def billed_issuer(billed_settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                        ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_issuer.app import create_app

    app = create_app(billed_settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url="https://issuer.frontdoor.test") as client:
        yield client
