"""The tenant isolation matrix: every object made under tenant A is invisible, unusable
and unrevocable under tenant B, through every surface that exists."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.dns_server import LocalDNS


async def test_isolation_matrix(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                other_tenant: TenantHandle, dns: LocalDNS) -> None:
    a, b = tenant, other_tenant
    # --- objects under A
    key = (await console.post("/api/v1/api-keys", json={"name": "a-key"}, headers=a.auth)).json()
    domain = f"{unique('iso-')}.example.com"
    claim = (await console.post("/api/v1/domains", json={"domain": domain}, headers=a.auth)).json()
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    assert (await console.post(f"/api/v1/domains/{domain}/verify", headers=a.auth)).json()["status"] == "verified"
    a_settings = (await console.get("/api/v1/issuer", headers=a.auth)).json()
    a_settings["settings"]["custom_scopes"] = {"a-secret-scope": "Only A has this"}
    assert (await console.put("/api/v1/issuer", json=a_settings["settings"], headers=a.auth)).status_code == 200
    rotated = (await console.post("/api/v1/signing-keys/rotate", headers=a.auth)).json()

    # --- invisible under B
    b_keys = (await console.get("/api/v1/api-keys", headers=b.auth)).json()["data"]
    assert key["id"] not in {k["id"] for k in b_keys}
    b_domains = (await console.get("/api/v1/domains", headers=b.auth)).json()["data"]
    assert domain not in {d["domain"] for d in b_domains}
    assert (await console.get(f"/api/v1/domains/{domain}", headers=b.auth)).status_code == 404
    assert (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=b.auth)).status_code == 404
    b_settings = (await console.get("/api/v1/issuer", headers=b.auth)).json()
    assert "a-secret-scope" not in b_settings["settings"]["custom_scopes"]
    b_audit = (await console.get("/api/v1/audit-log?limit=200", headers=b.auth)).json()["data"]
    assert not {e["target_id"] for e in b_audit} & {key["id"], domain, rotated["kid"], a.id}
    b_jwks = (await issuer.get(f"/{b.slug}/jwks.json")).json()["keys"]
    assert rotated["kid"] not in {k["kid"] for k in b_jwks}
    b_meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{b.slug}")).json()
    assert domain not in b_meta["poppy_domains"]
    assert "a-secret-scope" not in b_meta["scopes_supported"]
    b_signing = (await console.get("/api/v1/signing-keys", headers=b.auth)).json()["keys"]
    assert rotated["kid"] not in {k["kid"] for k in b_signing}

    # --- unusable and unrevocable under B
    assert (await console.delete(f"/api/v1/api-keys/{key['id']}", headers=b.auth)).status_code == 404
    assert (await console.delete(f"/api/v1/domains/{domain}", headers=b.auth)).status_code == 404
    assert (await console.post(f"/api/v1/domains/{domain}/verify", headers=b.auth)).status_code == 404
    assert (await console.post(f"/api/v1/domains/{domain}/publish-check", headers=b.auth)).status_code == 404
    # A's key acts as A only: it cannot see B's objects either
    a_view = (await console.get("/api/v1/tenant", headers={"Authorization": f"Bearer {key['api_key']}"})).json()
    assert a_view["id"] == a.id

    # --- A's objects are intact
    a_keys = (await console.get("/api/v1/api-keys", headers=a.auth)).json()["data"]
    assert next(k for k in a_keys if k["id"] == key["id"])["revoked_at"] is None
    assert (await console.get(f"/api/v1/domains/{domain}", headers=a.auth)).json()["status"] == "verified"
    a_meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{a.slug}")).json()
    assert domain in a_meta["poppy_domains"]
    dns.remove(claim["txt"]["name"])
