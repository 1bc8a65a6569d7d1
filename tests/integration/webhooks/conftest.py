"""Fixtures for webhook tests: tenants made directly in SQL, a real local receiver, a loopback-allowing sender."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from frontdoor_core.ids import new_id
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy, SafeSender
from webhooks_receiver import Receiver

from tests.conftest import unique

SCHEDULE = (timedelta(0), timedelta(seconds=5), timedelta(minutes=1), timedelta(minutes=5))


@pytest.fixture(scope="session")
def kek(runtime: Runtime) -> Kek:
    return Kek.from_env_value(runtime.settings.kek)


async def make_tenant(runtime: Runtime) -> str:
    tenant_id = new_id("ten")
    async with runtime.pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ($1, $2, 'Webhook Co')",
                           tenant_id, unique("wh-"))
    return tenant_id


@pytest.fixture
async def tenant_id(runtime: Runtime) -> str:
    return await make_tenant(runtime)


@pytest.fixture
async def other_tenant_id(runtime: Runtime) -> str:
    return await make_tenant(runtime)


@pytest.fixture
def actor(tenant_id: str) -> Actor:
    return Actor(tenant_id=tenant_id, type="api_key", id="key_test", request_id="req_test")


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as r:
        yield r


@pytest.fixture
def sender() -> SafeSender:
    return SafeSender(SafeFetcher(OutboundPolicy(allow_http_loopback=True, total_timeout=5.0)))


@pytest.fixture
def policy() -> DeliveryPolicy:
    return DeliveryPolicy(retry=RetryPolicy(schedule=SCHEDULE, jitter=0.0, retry_after_max=timedelta(minutes=10)),
                          timeout=timedelta(seconds=1), lease=timedelta(seconds=30),
                          disable_after=timedelta(hours=1))


@pytest.fixture
def deps(runtime: Runtime, sender: SafeSender, kek: Kek, policy: DeliveryPolicy) -> dict[str, Any]:
    """Keyword arguments of `deliver`."""
    return {"sender": sender, "kek": kek, "clock": runtime.clock, "policy": policy}
