"""Metadata, poppy.json and the protected-resource document follow ``protocol`` (ADR 0004 §1,
[S §2]): the wire answers of the issuer and the management API."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import configure
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.dns_server import LocalDNS

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


async def metadata(issuer: AsyncTestClient[Any], t: TenantHandle) -> Any:
    r = await issuer.get(f"/.well-known/oauth-authorization-server/{t.slug}")
    assert r.status_code == 200
    return r.json()


async def test_a_new_tenant_serves_both_and_publishes_0_2(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
) -> None:
    settings = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]
    assert settings["protocol"] == {"served": ["0.2", "1.0"], "published": "0.2", "join_callback_url": None}
    domain = await verified_domain(console, tenant, dns)
    meta = await metadata(issuer, tenant)
    assert meta["poppy_domains"] == [domain] and meta["protected_resources"] == [f"https://{domain}"]
    assert JWT_BEARER in meta["grant_types_supported"] and "refresh_token" in meta["grant_types_supported"]
    poppy = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    assert poppy["protocol_version"] == "0.2"
    prm = await console.get(f"/api/v1/domains/{domain}/oauth-protected-resource", headers=tenant.auth)
    assert prm.status_code == 200 and prm.headers["cache-control"] == "no-store"
    assert prm.json()["resource"] == f"https://{domain}"
    assert prm.json()["authorization_servers"] == [tenant.issuer]


async def test_publishing_1_0_and_serving_only_1_0(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await configure(console, tenant, protocol={"served": ["1.0"], "published": "1.0"})
    poppy = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    assert poppy["protocol_version"] == "1.0"
    meta = await metadata(issuer, tenant)
    assert JWT_BEARER not in meta["grant_types_supported"] and "refresh_token" in meta["grant_types_supported"]
    assert meta["protected_resources"] == [f"https://{domain}"]
    bad = await console.put("/api/v1/issuer", headers=tenant.auth, json={
        **(await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"],
        "protocol": {"served": ["1.0"], "published": "0.2"}})
    assert bad.status_code == 422 and "protocol.published" in bad.text


async def test_a_0_2_only_tenant_lists_no_protected_resources(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await configure(console, tenant, protocol={"served": ["0.2"], "published": "0.2"})
    for _ in range(60):  # the metadata is read per request; only the token endpoint caches settings
        meta = await metadata(issuer, tenant)
        if "protected_resources" not in meta:
            break
        await asyncio.sleep(0.1)
    assert "protected_resources" not in meta and meta["poppy_domains"] == [domain]
    prm = await console.get(f"/api/v1/domains/{domain}/oauth-protected-resource", headers=tenant.auth)
    assert prm.status_code == 409 and prm.json()["code"] == "profile_not_served"
