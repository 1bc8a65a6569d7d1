"""Sign-up and API keys over real PostgreSQL and Redis, asserted at the wire."""

from __future__ import annotations

from typing import Any

from frontdoor_tenancy.credentials.api_key import hash_api_key
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle, sign_up


async def test_signup_creates_tenant_owner_key_and_audit(console: AsyncTestClient[Any], db: Any) -> None:
    slug = unique("acme-")
    r = await console.post("/api/v1/signup", json={
        "email": f"Owner@{slug}.example.com", "password": STRONG_PASSWORD,
        "organization_name": "Acme Ltd", "slug": slug,
    })
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["tenant"]["slug"] == slug
    assert body["tenant"]["issuer"] == f"https://issuer.frontdoor.test/{slug}"
    assert body["tenant"]["id"].startswith("ten_")
    key = body["api_key"]
    assert key.startswith("fdk_")
    # persisted: the key only as a hash, the password as argon2id, the email lowercased
    row = await db.fetchrow("SELECT key_hash, prefix FROM api_keys WHERE tenant_id = $1", body["tenant"]["id"])
    assert row["key_hash"] == hash_api_key(key)
    assert key not in str(dict(row))
    admin = await db.fetchrow("SELECT email, password_hash, role FROM admins WHERE tenant_id = $1", body["tenant"]["id"])
    assert admin["email"] == f"owner@{slug}.example.com"
    assert admin["password_hash"].startswith("$argon2id$")
    assert admin["role"] == "owner"
    keys = await db.fetchval("SELECT count(*) FROM signing_keys WHERE tenant_id = $1", body["tenant"]["id"])
    assert keys == 1
    actions = [r["action"] for r in await db.fetch(
        "SELECT action FROM audit_log WHERE tenant_id = $1 ORDER BY id", body["tenant"]["id"])]
    assert actions == ["tenant.created", "signing_key.created", "api_key.created"]


async def test_signup_refuses_taken_slug_and_email(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    r = await console.post("/api/v1/signup", json={
        "email": f"x-{tenant.slug}@example.com", "password": STRONG_PASSWORD,
        "organization_name": "Copycat", "slug": tenant.slug})
    assert r.status_code == 409
    assert r.json()["code"] == "slug_taken"
    assert r.headers["content-type"].startswith("application/problem+json")
    r = await console.post("/api/v1/signup", json={
        "email": tenant.email.upper(), "password": STRONG_PASSWORD,
        "organization_name": "Copycat", "slug": unique("cc-")})
    assert r.status_code == 409
    assert r.json()["code"] == "email_taken"


async def test_signup_validation_lists_fields_and_changes_nothing(console: AsyncTestClient[Any], db: Any) -> None:
    before = await db.fetchval("SELECT count(*) FROM tenants")
    r = await console.post("/api/v1/signup", json={
        "email": "not-an-email", "password": "password", "organization_name": "", "slug": "API"})
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert set(errors) == {"email", "password", "organization_name", "slug"}
    assert await db.fetchval("SELECT count(*) FROM tenants") == before


async def test_api_keys_create_list_revoke(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    r = await console.post("/api/v1/api-keys", json={"name": "ci"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    created = r.json()
    second = created["api_key"]
    r = await console.get("/api/v1/api-keys", headers={"Authorization": f"Bearer {second}"})
    assert r.status_code == 200
    listed = r.json()["data"]
    assert {k["id"] for k in listed} >= {created["id"]}
    assert all("api_key" not in k and second not in str(k) for k in listed)
    r = await console.delete(f"/api/v1/api-keys/{created['id']}", headers=tenant.auth)
    assert r.status_code == 200
    assert r.json()["revoked_at"] is not None
    r = await console.get("/api/v1/api-keys", headers={"Authorization": f"Bearer {second}"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")


async def test_management_api_requires_a_valid_key(console: AsyncTestClient[Any]) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"},
                    {"Authorization": "Bearer fdk_AAAAAAAA_" + "A" * 40}):
        r = await console.get("/api/v1/api-keys", headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["code"] == "unauthorized"


async def test_api_keys_are_tenant_scoped(console: AsyncTestClient[Any], tenant: TenantHandle,
                                          other_tenant: TenantHandle) -> None:
    r = await console.post("/api/v1/api-keys", json={"name": "a-only"}, headers=tenant.auth)
    key_id = r.json()["id"]
    listed = (await console.get("/api/v1/api-keys", headers=other_tenant.auth)).json()["data"]
    assert key_id not in {k["id"] for k in listed}
    r = await console.delete(f"/api/v1/api-keys/{key_id}", headers=other_tenant.auth)
    assert r.status_code == 404
    listed = (await console.get("/api/v1/api-keys", headers=tenant.auth)).json()["data"]
    assert next(k for k in listed if k["id"] == key_id)["revoked_at"] is None


async def test_audit_log_lists_actions_newest_first(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    await console.post("/api/v1/api-keys", json={"name": "x"}, headers=tenant.auth)
    r = await console.get("/api/v1/audit-log", headers=tenant.auth)
    assert r.status_code == 200
    actions = [e["action"] for e in r.json()["data"]]
    assert actions[0] == "api_key.created"
    assert "tenant.created" in actions
    entry = r.json()["data"][0]
    assert entry["actor_type"] == "api_key"
    assert entry["request_id"]


async def test_second_tenant_signup(console: AsyncTestClient[Any]) -> None:
    a = await sign_up(console)
    b = await sign_up(console)
    assert a.id != b.id and a.issuer != b.issuer
