"""Per-tenant issuer discovery: RFC 8414 metadata with poppy_domains, JWKS, generated
poppy.json, and the publish check (PAP §3)."""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_protocol.discovery_check import check_discovery_document
from joserfc import jwt
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

BASE = "https://issuer.frontdoor.test"


async def verified_domain(console: AsyncTestClient[Any], t: TenantHandle, dns: LocalDNS) -> str:
    domain = f"{unique('shop-')}.example.com"
    claim = (await console.post("/api/v1/domains", json={"domain": domain}, headers=t.auth)).json()
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=t.auth)
    assert r.json()["status"] == "verified"
    return domain


async def test_metadata_at_both_locations(issuer: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    """PAP-3.2-07/08: path issuers publish metadata at the RFC 8414 §3.1 location."""
    a = await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")
    b = await issuer.get(f"/{tenant.slug}/.well-known/oauth-authorization-server")
    assert a.status_code == b.status_code == 200
    assert a.json() == b.json()
    meta = a.json()
    assert meta["issuer"] == f"{BASE}/{tenant.slug}" == tenant.issuer
    assert meta["poppy_domains"] == []
    assert meta["jwks_uri"] == f"{tenant.issuer}/jwks.json"
    assert meta["token_endpoint"] == f"{tenant.issuer}/oauth/token"
    assert meta["revocation_endpoint"] == f"{tenant.issuer}/oauth/revoke"
    assert meta["token_endpoint_auth_methods_supported"] == ["private_key_jwt"]
    assert "ES256" in meta["dpop_signing_alg_values_supported"]
    assert "urn:ietf:params:oauth:grant-type:jwt-bearer" in meta["grant_types_supported"]
    # No sign-in type is on by default: no endpoint is advertised that does not answer.
    assert "device_authorization_endpoint" not in meta
    assert "authorization_endpoint" not in meta
    assert "max-age" in a.headers["cache-control"]


async def test_unknown_slug_is_one_identical_404(issuer: AsyncTestClient[Any]) -> None:
    slug = unique("nobody-")
    answers = [await issuer.get(p) for p in (
        f"/.well-known/oauth-authorization-server/{slug}", f"/{slug}/.well-known/oauth-authorization-server",
        f"/{slug}/jwks.json", f"/{slug}/no/such/path")]
    assert {r.status_code for r in answers} == {404}
    assert len({r.content for r in answers}) == 1
    assert answers[0].json()["error"] == "not_found"


async def test_verified_domain_is_listed_and_removed_domain_is_not(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS
) -> None:
    """PAP-3.2-01: poppy_domains lists every verified domain, and only those."""
    domain = await verified_domain(console, tenant, dns)
    pending = f"{unique('pending-')}.example.com"
    await console.post("/api/v1/domains", json={"domain": pending}, headers=tenant.auth)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    assert meta["poppy_domains"] == [domain]
    await console.delete(f"/api/v1/domains/{domain}", headers=tenant.auth)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    assert meta["poppy_domains"] == []


async def test_jwks_publishes_es256_keys_and_rotation_publishes_first(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, db: Any
) -> None:
    jwks = (await issuer.get(f"/{tenant.slug}/jwks.json")).json()
    assert len(jwks["keys"]) == 1
    key = jwks["keys"][0]
    assert key["kty"] == "EC" and key["crv"] == "P-256" and key["alg"] == "ES256"
    assert "d" not in key
    r = await console.post("/api/v1/signing-keys/rotate", headers=tenant.auth)
    assert r.status_code == 201
    jwks = (await issuer.get(f"/{tenant.slug}/jwks.json")).json()
    assert {k["kid"] for k in jwks["keys"]} == {key["kid"], r.json()["kid"]}
    # private keys are encrypted at rest: no PEM in the column
    blob = await db.fetchval("SELECT private_key_enc FROM signing_keys WHERE tenant_id = $1 LIMIT 1", tenant.id)
    assert b"PRIVATE KEY" not in blob


async def test_a_signed_token_verifies_with_the_published_jwks(issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                               runtime: Any, kek_value: str) -> None:
    from frontdoor_tenancy.credentials.key_encryption import Kek
    from frontdoor_tenancy.signing_keys import load_signer

    async with runtime.pool.acquire() as conn:
        signer = await load_signer(conn, tenant.id, Kek.from_env_value(kek_value), runtime.clock())
    token = jwt.encode({"alg": "ES256", "kid": signer.kid}, {"iss": tenant.issuer}, signer.key)
    jwks = KeySet.import_key_set((await issuer.get(f"/{tenant.slug}/jwks.json")).json())
    assert jwt.decode(token, jwks).claims["iss"] == tenant.issuer


async def test_issuer_settings_round_trip_and_validation(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                         tenant: TenantHandle) -> None:
    current = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()
    assert current["issuer"] == tenant.issuer
    settings = current["settings"]
    settings["direct"] = {"enabled": True, "scopes": ["poppy:read", "orders"]}
    settings["custom_scopes"] = {"orders": "See and change your orders"}
    settings["apis"] = [{"type": "openapi", "url": "https://api.shop.example/openapi.json", "description": "Orders"}]
    r = await console.put("/api/v1/issuer", json=settings, headers={**tenant.auth, "If-Match": str(current["version"])})
    assert r.status_code == 200, r.text
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    assert meta["authorization_endpoint"] == f"{tenant.issuer}/oauth/authorize"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["authorization_response_iss_parameter_supported"] is True
    assert "orders" in meta["scopes_supported"]
    # a stale version is refused
    r = await console.put("/api/v1/issuer", json=settings, headers={**tenant.auth, "If-Match": str(current["version"])})
    assert r.status_code == 409
    # settings that would make an invalid document are refused
    bad = dict(settings, device={"enabled": True, "scopes": ["undeclared"]},
               apis=[{"type": "mcp", "url": "http://mcp.shop.example/mcp"}],
               custom_scopes={"poppy:admin": "no"}, session_lifetime_s=30 * 86400)
    r = await console.put("/api/v1/issuer", json=bad, headers=tenant.auth)
    assert r.status_code == 422
    assert {"device.scopes", "apis[0].url", "session_lifetime_s"} <= set(r.json()["errors"])


async def test_poppy_json_is_generated_for_verified_domains_only(
    console: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS
) -> None:
    pending = f"{unique('p-')}.example.com"
    await console.post("/api/v1/domains", json={"domain": pending}, headers=tenant.auth)
    r = await console.get(f"/api/v1/domains/{pending}/poppy.json", headers=tenant.auth)
    assert r.status_code == 409 and r.json()["code"] == "domain_not_verified"
    domain = await verified_domain(console, tenant, dns)
    r = await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["protocol_version"] == "0.2"
    assert doc["organization"]["domain"] == domain
    assert doc["auth"]["issuer"] == tenant.issuer
    assert "device" not in doc["auth"] and "direct" not in doc["auth"]
    assert check_discovery_document(doc, domain) == []
    other = await verified_domain(console, tenant, dns)
    doc2 = (await console.get(f"/api/v1/domains/{other}/poppy.json", headers=tenant.auth)).json()
    assert doc2["auth"] == doc["auth"]  # PAP-3.2-06


async def _publish(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle, web: MockWeb,
                   domain: str, doc: Any) -> None:
    web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{t.slug}")).json()
    web.serve(f"{BASE}/.well-known/oauth-authorization-server/{t.slug}", json=meta)
    # New tenants serve PAP 1.0 too: the check then reads the RFC 9728 document as well [S §2].
    resource = await console.get(f"/api/v1/domains/{domain}/oauth-protected-resource", headers=t.auth)
    if resource.status_code == 200:
        web.serve(f"https://{domain}/.well-known/oauth-protected-resource", json=resource.json())


async def test_publish_check_passes_for_the_generated_document(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb
) -> None:
    domain = await verified_domain(console, tenant, dns)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    await _publish(console, issuer, tenant, web, domain, doc)
    r = await console.post(f"/api/v1/domains/{domain}/publish-check", headers=tenant.auth)
    assert r.status_code == 200
    report = r.json()
    assert report["ok"] is True, report["findings"]
    assert report["findings"] == []
    assert report["url"] == f"https://{domain}/.well-known/poppy.json"
    sent = [q for q in web.requests if q.url.host == domain][-1]
    assert "authorization" not in sent.headers and "cookie" not in sent.headers


@pytest.mark.parametrize(("mutate", "code"), [
    (lambda d, dom: d["organization"].update(domain="www." + dom), "domain_mismatch"),
    (lambda d, dom: d["auth"].update(issuer="https://elsewhere.example/x"), "issuer_mismatch"),
    (lambda d, dom: d["auth"].update(device={"scopes": ["poppy:read", "poppy:write"]}), "auth_differs"),
    (lambda d, dom: d.pop("auth"), "auth_missing"),
])
async def test_publish_check_reports_mismatches(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    mutate: Any, code: str,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    mutate(doc, domain)
    await _publish(console, issuer, tenant, web, domain, doc)
    report = (await console.post(f"/api/v1/domains/{domain}/publish-check", headers=tenant.auth)).json()
    assert report["ok"] is False
    codes = {f["code"] for f in report["findings"]}
    assert code in codes, report
    assert all(f["hint"] for f in report["findings"])


async def test_publish_check_fetch_failures(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                            tenant: TenantHandle, dns: LocalDNS, web: MockWeb) -> None:
    domain = await verified_domain(console, tenant, dns)
    url = f"https://{domain}/.well-known/poppy.json"
    check = f"/api/v1/domains/{domain}/publish-check"
    report = (await console.post(check, headers=tenant.auth)).json()
    assert [f["code"] for f in report["findings"]] == ["not_found"]
    web.redirect(url, f"http://{domain}/poppy.json")
    report = (await console.post(check, headers=tenant.auth)).json()
    assert [f["code"] for f in report["findings"]] == ["redirect_not_https"]
    web.serve(url, body=b'{"protocol_version": "0.2", "protocol_version": "0.2"}')
    report = (await console.post(check, headers=tenant.auth)).json()
    assert [f["code"] for f in report["findings"]] == ["duplicate_member"]
    web.serve(url, body=b"<html></html>", headers={"content-type": "text/html"})
    report = (await console.post(check, headers=tenant.auth)).json()
    assert [f["code"] for f in report["findings"]] == ["not_json"]
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    web.serve(url, json=doc)
    web.forget("issuer.frontdoor.test")
    report = (await console.post(check, headers=tenant.auth)).json()
    assert [(f["code"], f["source"]) for f in report["findings"]] == [("not_found", "issuer metadata")]


async def test_publish_check_sees_a_domain_not_listed(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                      tenant: TenantHandle, dns: LocalDNS, web: MockWeb) -> None:
    domain = await verified_domain(console, tenant, dns)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    await _publish(console, issuer, tenant, web, domain, doc)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    meta["poppy_domains"] = []
    web.serve(f"{BASE}/.well-known/oauth-authorization-server/{tenant.slug}", json=meta)
    report = (await console.post(f"/api/v1/domains/{domain}/publish-check", headers=tenant.auth)).json()
    assert "not_listed" in {f["code"] for f in report["findings"]}


async def test_discovery_objects_are_tenant_scoped(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                   other_tenant: TenantHandle, dns: LocalDNS) -> None:
    domain = await verified_domain(console, tenant, dns)
    for path in (f"/api/v1/domains/{domain}/poppy.json",):
        assert (await console.get(path, headers=other_tenant.auth)).status_code == 404
    r = await console.post(f"/api/v1/domains/{domain}/publish-check", headers=other_tenant.auth)
    assert r.status_code == 404
    mine = (await console.get("/api/v1/issuer", headers=other_tenant.auth)).json()
    assert mine["issuer"] == other_tenant.issuer


async def test_compromised_rotation_unpublishes_the_old_key_at_once(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, db: Any
) -> None:
    old = {k["kid"] for k in (await issuer.get(f"/{tenant.slug}/jwks.json")).json()["keys"]}
    r = await console.post("/api/v1/signing-keys/rotate?compromised=true", headers=tenant.auth)
    assert r.status_code == 201, r.text
    new_kid = r.json()["kid"]
    published = {k["kid"] for k in (await issuer.get(f"/{tenant.slug}/jwks.json")).json()["keys"]}
    assert published == {new_kid} and not (old & published)
    details = await db.fetchval("SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'signing_key.rotated'",
                                tenant.id)
    assert details["compromised"] is True


async def test_retired_keys_are_pruned_after_retention(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                       db: Any) -> None:
    from datetime import UTC, datetime, timedelta

    from frontdoor_tenancy.signing_keys import RETAIN_FOR, prune_retired_keys

    first = await db.fetchval("SELECT kid FROM signing_keys WHERE tenant_id = $1", tenant.id)
    r = await console.post("/api/v1/signing-keys/rotate?compromised=true", headers=tenant.auth)
    assert r.status_code == 201
    now = datetime.now(UTC)
    # The compromised rotation already retired the old key past retention: the job removes it.
    assert await prune_retired_keys(db, now) >= 1
    kids = {row["kid"] for row in await db.fetch("SELECT kid FROM signing_keys WHERE tenant_id = $1", tenant.id)}
    assert kids == {r.json()["kid"]} and first not in kids
    # A normally rotated key stays until its retention has passed.
    r2 = await console.post("/api/v1/signing-keys/rotate", headers=tenant.auth)
    assert r2.status_code == 201
    await prune_retired_keys(db, now + timedelta(minutes=30))
    assert await db.fetchval("SELECT count(*) FROM signing_keys WHERE tenant_id = $1", tenant.id) == 2
    await prune_retired_keys(db, now + RETAIN_FOR + timedelta(hours=1))
    assert await db.fetchval("SELECT count(*) FROM signing_keys WHERE tenant_id = $1", tenant.id) == 1
