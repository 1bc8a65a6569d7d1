"""Webhook URLs that could never be delivered are refused when registered (API and dashboard),
and only FRONTDOOR_WEBHOOK_ALLOWLIST, never FRONTDOOR_OUTBOUND_ALLOWLIST, lets a private one in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.console.test_dashboard import sign_in
from tests.support.clock import ShiftableClock

UNDELIVERABLE = [
    "https://127.1/hook",
    "https://2130706433/hook",
    "https://0x7f000001/hook",
    "https://0177.0.0.1/hook",
    "https://127.0.0.1./hook",
    "https://１２７.０.０.１/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://10.0.0.7/hook",
    "https://169.254.169.254/latest/meta-data/",  # (loopback names are allowed in dev, as tests run)
]


@pytest.mark.parametrize("url", UNDELIVERABLE)
async def test_the_api_refuses_undeliverable_urls(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
                                                  url: str) -> None:
    r = await console.post("/api/v1/webhook-endpoints", json={"url": url}, headers=tenant.auth)
    assert r.status_code == 422, r.text
    body = r.json()
    assert r.headers["content-type"].startswith("application/problem+json")
    assert body["code"] == "url_not_public" and body["errors"] == {"url": "not a public address"}
    assert await db.fetchval("SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1", tenant.id) == 0


async def test_changing_an_endpoint_to_an_undeliverable_url_is_refused(console: AsyncTestClient[Any],
                                                                      tenant: TenantHandle, db: Any) -> None:
    r = await console.post("/api/v1/webhook-endpoints", json={"url": "https://hooks.example.com/in"},
                           headers=tenant.auth)
    assert r.status_code == 201, r.text
    endpoint_id = r.json()["endpoint"]["id"]
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}", json={"url": "https://0x7f.1/in"},
                           headers=tenant.auth)
    assert r.status_code == 422 and r.json()["code"] == "url_not_public"
    assert await db.fetchval("SELECT url FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2",
                             tenant.id, endpoint_id) == "https://hooks.example.com/in"
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}", json={"url": "https://u:p@hooks.example.com/"},
                           headers=tenant.auth)
    assert r.status_code == 422 and r.json()["code"] == "invalid_url"


async def test_the_dashboard_refuses_undeliverable_urls(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                        db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    r = await console.post("/webhooks", data={"url": "https://2130706433/in", "_csrf_token": csrf})
    assert r.status_code == 422 and 'role="alert"' in r.text and "not a public address" in r.text
    assert await db.fetchval("SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1", tenant.id) == 0
    console.cookies.clear()


@pytest.fixture
async def private_console(settings: Settings, migrated: str, clock: ShiftableClock
                          ) -> AsyncIterator[AsyncTestClient[Any]]:
    """A private deployment: Frontdoor's fetches may reach 10/8, webhooks only 10.1/16."""
    from frontdoor_console.app import create_app

    private = msgspec.structs.replace(settings, env="production", outbound_allowlist="10.0.0.0/8",
                                      webhook_allowlist="10.1.0.0/16",
                                      issuer_base_url="https://issuer.frontdoor.test",
                                      console_base_url="https://console.frontdoor.test",
                                      ledger_base_url="https://ledger.frontdoor.test")
    async with AsyncTestClient(create_app(private, clock=clock), base_url="https://console.frontdoor.test") as c:
        yield c


async def test_webhooks_do_not_inherit_the_outbound_allowlist(private_console: AsyncTestClient[Any]) -> None:
    tenant = await sign_up(private_console)
    r = await private_console.post("/api/v1/webhook-endpoints", json={"url": "https://10.2.0.9/hook"},
                                   headers=tenant.auth)
    assert r.status_code == 422 and r.json()["code"] == "url_not_public"
    r = await private_console.post("/api/v1/webhook-endpoints", json={"url": "https://10.1.0.9/hook"},
                                   headers=tenant.auth)
    assert r.status_code == 201, r.text
