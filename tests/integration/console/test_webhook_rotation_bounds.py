"""A rotation's overlap_seconds is bounded: out of range is a 422 problem, never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle


@pytest.mark.parametrize("overlap", [10**20, 2**63, -1, 604801, 10**9])
@pytest.mark.parametrize("route", ["rotate-secret", "signing-key"])
async def test_an_out_of_range_overlap_is_refused(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
                                                  overlap: int, route: str) -> None:
    r = await console.post("/api/v1/webhook-endpoints", json={"url": "https://hooks.example.com/in"},
                           headers=tenant.auth)
    endpoint_id = r.json()["endpoint"]["id"]
    r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/{route}", json={"overlap_seconds": overlap},
                           headers=tenant.auth)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "invalid_overlap" and r.json()["errors"] == {"overlap_seconds": "0 to 604800"}
    # nothing rotated: one secret, still current
    assert await db.fetchval("SELECT count(*) FROM webhook_secrets WHERE tenant_id = $1 AND endpoint_id = $2"
                             " AND algorithm = 'hmac-sha256'", tenant.id, endpoint_id) == 1


async def test_the_bounds_themselves_are_accepted(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    r = await console.post("/api/v1/webhook-endpoints", json={"url": "https://hooks.example.com/in"},
                           headers=tenant.auth)
    endpoint_id = r.json()["endpoint"]["id"]
    for overlap in (0, 604800):
        r = await console.post(f"/api/v1/webhook-endpoints/{endpoint_id}/rotate-secret",
                               json={"overlap_seconds": overlap}, headers=tenant.auth)
        assert r.status_code == 200 and r.json()["secret"].startswith("whsec_")
