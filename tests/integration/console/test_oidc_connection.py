"""The ``oidc`` login connection in the management API and the dashboard: validation, the
write-only client secret (KEK-encrypted apart from the settings, never read back), the
audit log, and the dashboard's discovery check and "test connection"."""

from __future__ import annotations

import re
from typing import Any

from frontdoor_tenancy.credentials import Kek, row_aad
from frontdoor_tenancy.oidc_connection import load_client_secret
from joserfc.jwk import RSAKey
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.support.mock_web import MockWeb

SECRET = "s3cret-of-the-idp-0123456789"


def publish_idp(web: MockWeb) -> str:
    issuer = f"https://{unique('idp-')}.example"
    web.serve(f"{issuer}/.well-known/openid-configuration", json={
        "issuer": issuer, "authorization_endpoint": f"{issuer}/authorize", "token_endpoint": f"{issuer}/token",
        "jwks_uri": f"{issuer}/jwks", "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"]})
    key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    web.serve(f"{issuer}/jwks", json={"keys": [key.as_dict(private=False)]})
    return issuer


async def put_login(console: AsyncTestClient[Any], t: TenantHandle, login: dict[str, Any] | None) -> Any:
    current = (await console.get("/api/v1/issuer", headers=t.auth)).json()["settings"]
    return await console.put("/api/v1/issuer", json={**current, "login": login}, headers=t.auth)


async def test_client_secret_is_write_only_encrypted_and_audited(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                                 other_tenant: TenantHandle, db: Any,
                                                                 kek_value: str) -> None:
    login = {"type": "oidc", "issuer": "https://login.acme.example", "client_id": "frontdoor", "client_secret": SECRET}
    r = await put_login(console, tenant, login)
    assert r.status_code == 200, r.text
    assert SECRET not in r.text and r.json()["settings"]["login"]["client_secret"] is None
    assert r.json()["login_client_secret_set"] is True
    got = await console.get("/api/v1/issuer", headers=tenant.auth)
    assert SECRET not in got.text and got.json()["login_client_secret_set"] is True
    assert got.json()["settings"]["login"]["account_claim"] == "sub"
    # At rest: not in the settings, KEK-encrypted in its own row, bound to the tenant.
    stored = await db.fetchval("SELECT settings::text FROM issuer_settings WHERE tenant_id = $1", tenant.id)
    assert SECRET not in stored
    blob = await db.fetchval("SELECT secret_ciphertext FROM oidc_client_secrets WHERE tenant_id = $1", tenant.id)
    assert SECRET.encode() not in blob
    kek = Kek.from_env_value(kek_value)
    assert kek.decrypt(blob, aad=row_aad("oidc_client_secret", tenant.id)) == SECRET.encode()
    assert await load_client_secret(db, kek, tenant.id) == SECRET
    # The blob copied to another tenant's row does not open there.
    await db.execute("INSERT INTO oidc_client_secrets (tenant_id, secret_ciphertext, updated_at)"
                     " VALUES ($1, $2, now())", other_tenant.id, blob)
    assert await load_client_secret(db, kek, other_tenant.id) is None
    # Another tenant sees nothing of it.
    assert (await console.get("/api/v1/issuer", headers=other_tenant.auth)).json()["settings"]["login"] is None

    # Written again without the secret: the stored one is kept.
    kept = await put_login(console, tenant, {**login, "client_secret": None, "account_claim": "email"})
    assert kept.status_code == 200, kept.text
    assert await load_client_secret(db, kek, tenant.id) == SECRET
    # Back to the handoff: the secret is deleted.
    handoff = await put_login(console, tenant, {"url": "https://shop.example/login",
                                                "jwks_uri": "https://shop.example/jwks.json"})
    assert handoff.status_code == 200, handoff.text
    assert handoff.json()["login_client_secret_set"] is False
    assert await db.fetchval("SELECT count(*) FROM oidc_client_secrets WHERE tenant_id = $1", tenant.id) == 0
    audit = await db.fetch("SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'issuer.settings_updated'"
                           " ORDER BY at", tenant.id)
    assert [a["details"].get("login_client_secret") for a in audit][-3:] == ["set", "kept", "removed"]
    assert all(SECRET not in str(a["details"]) for a in audit)


async def test_oidc_connection_validation(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    def fields(r: Any) -> dict[str, str]:
        assert r.status_code == 422, r.text
        return dict(r.json()["errors"]) if "errors" in r.json() else dict(r.json()["fields"])

    no_secret = await put_login(console, tenant, {"type": "oidc", "issuer": "https://login.acme.example",
                                                  "client_id": "fd"})
    assert "login.client_secret" in fields(no_secret)
    bad = await put_login(console, tenant, {"type": "oidc", "issuer": "http://login.acme.example/?x=1",
                                            "client_id": "has space", "client_secret": "short"})
    assert set(fields(bad)) >= {"login.issuer", "login.client_id", "login.client_secret"}
    mixed = await put_login(console, tenant, {"type": "oidc", "issuer": "https://login.acme.example",
                                              "client_id": "fd", "client_secret": SECRET,
                                              "url": "https://shop.example/login"})
    assert "login.type" in fields(mixed)
    assert SECRET not in mixed.text
    # A logout token names the user by sub: back-channel logout needs the sub account claim.
    by_email = await put_login(console, tenant, {"type": "oidc", "issuer": "https://login.acme.example",
                                                 "client_id": "fd", "client_secret": SECRET,
                                                 "account_claim": "email", "backchannel_logout": True})
    assert "login.backchannel_logout" in fields(by_email)


async def test_dashboard_checks_the_issuer_and_tests_the_connection(console: AsyncTestClient[Any],
                                                                   tenant: TenantHandle, web: MockWeb,
                                                                   db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    page = await console.get("/settings")
    assert f"{tenant.issuer}/oidc/callback" in page.text  # the redirect URI to register
    assert f"{tenant.issuer}/oidc/backchannel-logout" in page.text  # and the back-channel logout URI
    version = re.search(r'name="version" value="(\d+)"', page.text).group(1)  # type: ignore[union-attr]
    form = {"_csrf_token": csrf, "version": version, "organization_name": "Acme", "custom_scopes": "",
            "session_lifetime_s": "3600", "sessions_per_agent_per_minute": "60",
            "token_requests_per_network_per_minute": "600", "login_type": "oidc",
            "oidc_issuer": f"https://{unique('nothing-')}.example", "oidc_client_id": "frontdoor",
            "oidc_client_secret": SECRET, "oidc_auth_method": "client_secret_post", "oidc_account_claim": "email"}
    wrong = await console.post("/settings", data=form)
    assert wrong.status_code == 422 and "discovery failed" in wrong.text and SECRET not in wrong.text
    assert await db.fetchval("SELECT count(*) FROM oidc_client_secrets WHERE tenant_id = $1", tenant.id) == 0

    issuer = publish_idp(web)
    r = await console.post("/settings", data={**form, "oidc_issuer": issuer}, follow_redirects=False)
    assert r.status_code == 303, r.text
    api = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()
    assert api["settings"]["login"]["backchannel_logout"] is False  # the box was not ticked
    assert api["settings"]["login"] == {**api["settings"]["login"], "type": "oidc", "issuer": issuer,
                                        "client_id": "frontdoor", "client_secret": None,
                                        "token_endpoint_auth_method": "client_secret_post", "account_claim": "email"}
    assert api["login_client_secret_set"] is True
    shown = await console.get("/settings")
    assert SECRET not in shown.text and "Test connection" in shown.text
    # The token endpoint refuses the never issued code but not the client: the credentials are accepted.
    web.serve(f"{issuer}/token", status=400, json={"error": "invalid_grant"})
    ok = await console.post("/settings/login/test", data={"_csrf_token": csrf}, follow_redirects=True)
    assert ok.status_code == 200 and "Connection works" in ok.text
    # Any other answer is shown by its error code only, never its description.
    web.serve(f"{issuer}/token", status=400, json={"error": "unauthorized_client", "error_description": "psst"})
    other = await console.post("/settings/login/test", data={"_csrf_token": csrf})
    assert other.status_code == 422 and "HTTP 400 unauthorized_client" in other.text and "psst" not in other.text
    web.serve(f"{issuer}/token", status=500, body=b"<html>oops</html>", headers={"content-type": "text/html"})
    down = await console.post("/settings/login/test", data={"_csrf_token": csrf})
    assert down.status_code == 422 and "HTTP 500 (no error code)" in down.text and "oops" not in down.text
    # The IdP's keys disappear: the test says so.
    web.serve(f"{issuer}/jwks", status=404, json={})
    broken = await console.post("/settings/login/test", data={"_csrf_token": csrf})
    assert broken.status_code == 422 and "JWKS" in broken.text
