"""The publish check over PAP 1.0's three documents [S §2]: for a tenant serving 1.0 it also
fetches ``https://{domain}/.well-known/oauth-protected-resource`` as an agent would and
cross-checks it with ``poppy.json`` and the issuer metadata, one finding per mismatch."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import configure
from tests.integration.test_issuer_discovery import BASE, verified_domain
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb


async def publish_all(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle, web: MockWeb,
                      domain: str, *, resource: dict[str, Any] | None = None,
                      metadata: dict[str, Any] | None = None) -> None:
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=t.auth)).json()
    web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
    meta = metadata or (await issuer.get(f"/.well-known/oauth-authorization-server/{t.slug}")).json()
    web.serve(f"{BASE}/.well-known/oauth-authorization-server/{t.slug}", json=meta)
    generated = await console.get(f"/api/v1/domains/{domain}/oauth-protected-resource", headers=t.auth)
    assert generated.status_code == 200, generated.text
    web.serve(f"https://{domain}/.well-known/oauth-protected-resource", json=resource or generated.json())


async def check(console: AsyncTestClient[Any], t: TenantHandle, domain: str) -> dict[str, Any]:
    r = await console.post(f"/api/v1/domains/{domain}/publish-check", headers=t.auth)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_the_three_generated_documents_pass(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await publish_all(console, issuer, tenant, web, domain)
    report = await check(console, tenant, domain)
    assert report["ok"] is True and report["findings"] == [], report
    assert any(q.url.host == domain and q.url.path == "/.well-known/oauth-protected-resource" for q in web.requests)


async def test_a_missing_protected_resource_document_is_reported(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    web.serve(f"{BASE}/.well-known/oauth-authorization-server/{tenant.slug}", json=meta)
    report = await check(console, tenant, domain)
    assert report["ok"] is False
    assert [(f["code"], f["source"]) for f in report["findings"]] == [("not_found", "protected-resource")]


@pytest.mark.parametrize(("change", "code"), [
    (lambda d, dom, iss: d.update(resource=f"https://{dom}/"), "resource_mismatch"),  # character for character
    (lambda d, dom, iss: d.update(resource=f"https://www.{dom}"), "resource_mismatch"),
    (lambda d, dom, iss: d.update(authorization_servers=[iss + "/"]), "issuer_not_authorization_server"),
])
async def test_each_mismatch_of_the_protected_resource_document_has_its_code(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    change: Any, code: str,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    resource = (await console.get(f"/api/v1/domains/{domain}/oauth-protected-resource", headers=tenant.auth)).json()
    change(resource, domain, tenant.issuer)
    await publish_all(console, issuer, tenant, web, domain, resource=resource)
    report = await check(console, tenant, domain)
    assert report["ok"] is False
    assert [(f["code"], f["source"]) for f in report["findings"]] == [(code, "protected-resource")], report
    assert all(f["hint"] for f in report["findings"])


async def test_issuer_metadata_not_protecting_the_domain_is_reported(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    meta["protected_resources"] = [r for r in meta["protected_resources"] if r != f"https://{domain}"]
    await publish_all(console, issuer, tenant, web, domain, metadata=meta)
    report = await check(console, tenant, domain)
    codes = {(f["code"], f["source"]) for f in report["findings"]}
    assert ("resource_not_protected", "protected-resource") in codes, report


async def test_a_tenant_serving_only_0_2_is_not_asked_for_the_1_0_documents(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    await configure(console, tenant, protocol={"served": ["0.2"], "published": "0.2"})
    domain = await verified_domain(console, tenant, dns)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    web.serve(f"{BASE}/.well-known/oauth-authorization-server/{tenant.slug}", json=meta)
    report = await check(console, tenant, domain)
    assert report["ok"] is True and report["findings"] == [], report
    assert not any(q.url.host == domain and q.url.path == "/.well-known/oauth-protected-resource"
                   for q in web.requests)
