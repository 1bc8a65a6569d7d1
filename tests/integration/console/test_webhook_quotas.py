"""Per-tenant webhook quotas: a cap on endpoints, and rate limits on test sends, redeliveries
and recovery jobs (429 problem with Retry-After), one tenant's use never spending another's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle, sign_up
from tests.support.clock import ShiftableClock
from tests.support.fixed_windows import room_in_window


@pytest.fixture
async def small(settings: Settings, migrated: str, clock: ShiftableClock) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_console.app import create_app

    tight = msgspec.structs.replace(settings, webhook_endpoint_limit=2, webhook_test_rate_limit=2,
                                    webhook_redelivery_rate_limit=2, webhook_recovery_rate_limit=1)
    async with AsyncTestClient(create_app(tight, clock=clock), base_url="https://console.frontdoor.test") as c:
        yield c


async def _endpoint(client: AsyncTestClient[Any], tenant: TenantHandle, n: int) -> Any:
    return await client.post("/api/v1/webhook-endpoints", json={"url": f"https://hooks{n}.example.com/in"},
                             headers=tenant.auth)


def _limited(r: Any) -> None:
    assert r.status_code == 429, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "rate_limited" and r.json()["status"] == 429
    assert 0 < int(r.headers["retry-after"]) <= 3600


async def test_a_tenant_has_a_bounded_number_of_endpoints(small: AsyncTestClient[Any], db: Any) -> None:
    a, b = await sign_up(small), await sign_up(small)
    assert [(await _endpoint(small, a, n)).status_code for n in range(2)] == [201, 201]
    r = await _endpoint(small, a, 3)
    assert r.status_code == 409 and r.json()["code"] == "webhook_endpoint_limit"
    assert await db.fetchval("SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1", a.id) == 2
    assert (await _endpoint(small, b, 1)).status_code == 201  # the other tenant's cap is its own
    # deleting one makes room again
    first = (await small.get("/api/v1/webhook-endpoints", headers=a.auth)).json()["data"][0]["id"]
    assert (await small.delete(f"/api/v1/webhook-endpoints/{first}", headers=a.auth)).status_code == 204
    assert (await _endpoint(small, a, 4)).status_code == 201


async def test_test_sends_redeliveries_and_recoveries_are_rate_limited_per_tenant(
        small: AsyncTestClient[Any]) -> None:
    a, b = await sign_up(small), await sign_up(small)
    ea = (await _endpoint(small, a, 1)).json()["endpoint"]["id"]
    eb = (await _endpoint(small, b, 1)).json()["endpoint"]["id"]
    # Each limit's counts fall in one of its windows: a minute (test sends, redeliveries), an hour (recoveries).
    await room_in_window(60, 3600, needed_s=15)

    sent = [await small.post(f"/api/v1/webhook-endpoints/{ea}/test", headers=a.auth) for _ in range(2)]
    assert [r.status_code for r in sent] == [202, 202]
    _limited(await small.post(f"/api/v1/webhook-endpoints/{ea}/test", headers=a.auth))
    assert (await small.post(f"/api/v1/webhook-endpoints/{eb}/test", headers=b.auth)).status_code == 202

    message_id = sent[0].json()["message_id"]
    for _ in range(2):
        r = await small.post(f"/api/v1/webhook-messages/{message_id}/redeliver", headers=a.auth)
        assert r.status_code != 429, r.text
    _limited(await small.post(f"/api/v1/webhook-messages/{message_id}/redeliver", headers=a.auth))

    since = {"since": "2020-01-01T00:00:00Z"}
    assert (await small.post(f"/api/v1/webhook-endpoints/{ea}/recover", json=since, headers=a.auth)).status_code == 202
    _limited(await small.post(f"/api/v1/webhook-endpoints/{ea}/recover", json=since, headers=a.auth))
    assert (await small.post(f"/api/v1/webhook-endpoints/{eb}/recover", json=since, headers=b.auth)).status_code == 202
