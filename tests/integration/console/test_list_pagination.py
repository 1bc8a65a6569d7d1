"""The management API's lists are keyset-paginated: bounded ``limit``, opaque ``cursor``,
``next_cursor`` null on the last page, every row exactly once, per tenant."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle


async def _walk(console: AsyncTestClient[Any], tenant: TenantHandle, path: str, limit: int) -> list[list[Any]]:
    pages, cursor = [], None
    for _ in range(50):
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        r = await console.get(path, params=params, headers=tenant.auth)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["data"]) <= limit
        pages.append(body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("the pages never ended")


async def test_webhook_endpoints_api_keys_and_credentials_page_through_once(
        console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle) -> None:
    for n in range(5):
        assert (await console.post("/api/v1/webhook-endpoints", json={"url": f"https://h{n}.example.com/in"},
                                   headers=tenant.auth)).status_code == 201
        assert (await console.post("/api/v1/api-keys", json={"name": f"k{n}"}, headers=tenant.auth)).status_code == 201
        assert (await console.post("/api/v1/resource-credentials", json={"name": f"c{n}"},
                                   headers=tenant.auth)).status_code == 201
    await console.post("/api/v1/webhook-endpoints", json={"url": "https://theirs.example.com/in"},
                       headers=other_tenant.auth)
    for path, total, order in (("/api/v1/webhook-endpoints", 5, "asc"), ("/api/v1/api-keys", 6, "desc"),
                               ("/api/v1/resource-credentials", 5, "desc")):
        pages = await _walk(console, tenant, path, 2)
        ids = [row["id"] for p in pages for row in p]
        assert [len(p) for p in pages][:-1] == [2] * (len(pages) - 1), path
        assert len(ids) == len(set(ids)) == total, path  # every row once, only this tenant's
        assert ids == sorted(ids, reverse=order == "desc"), path
        everything = (await console.get(path, params={"limit": 200}, headers=tenant.auth)).json()
        assert [r["id"] for r in everything["data"]] == ids and everything["next_cursor"] is None


async def test_domains_page_through_once(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    names = [f"{unique('p')}.example.com" for _ in range(3)]
    for name in names:
        assert (await console.post("/api/v1/domains", json={"domain": name}, headers=tenant.auth)).status_code == 201
    pages = await _walk(console, tenant, "/api/v1/domains", 1)
    assert [row["domain"] for p in pages for row in p] == names


@pytest.mark.parametrize("path", ["/api/v1/webhook-endpoints", "/api/v1/api-keys", "/api/v1/resource-credentials",
                                  "/api/v1/domains", "/api/v1/agents", "/api/v1/operations"])
async def test_limit_is_bounded_and_a_forged_cursor_is_refused(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                               path: str) -> None:
    for bad in ("0", "201", "-1"):
        r = await console.get(path, params={"limit": bad}, headers=tenant.auth)
        assert r.status_code == 422 and r.json()["code"] == "invalid_body", (path, bad)
    for forged in ("not-a-cursor", base64.urlsafe_b64encode(b'{"a":1}').decode(),
                   base64.urlsafe_b64encode(b'["x","y","z"]').decode()):
        r = await console.get(path, params={"cursor": forged}, headers=tenant.auth)
        assert r.status_code == 422 and r.json()["code"] == "invalid_cursor", (path, forged, r.text)
    assert (await console.get(path, headers=tenant.auth)).json()["next_cursor"] is None
