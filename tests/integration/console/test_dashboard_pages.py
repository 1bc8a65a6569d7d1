"""The dashboard's agent-traffic and configuration pages at the wire: Sessions (live list,
filters, the polled fragment, detail, revoke), Accounts (disconnect one or all), issuer
settings (save, conflicts, key rotation), resource-server credentials, feedback. Every
destructive action asks first and is audited; another tenant's objects are 404."""

from __future__ import annotations

import re
from typing import Any

from frontdoor_core.ids import new_id
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_agent, sign_in
from tests.support.clock import ShiftableClock


async def signed_in_session(db: Any, tenant: TenantHandle, client_id: str, account: str, clock: ShiftableClock,
                            scope: str = "poppy:read") -> str:
    """A live Session of ``client_id`` signed in to ``account`` (rows as the sign-in grant writes them)."""
    now = clock()
    sign_in_id = new_id("evt")
    session_id = new_id("ses")
    await db.execute(
        "INSERT INTO sign_ins (tenant_id, id, client_id, user_id, account_id, scope, type, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, 'device', $7)", tenant.id, sign_in_id, client_id, unique("u-"), account,
        scope, now)
    await db.execute(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at, signed_in_at,"
        " account_id, scope, bound_account, sign_in_id) VALUES ($1, $2, $3, $4, $5, $5, $5, $6, $7, $6, $8)",
        tenant.id, session_id, client_id, unique("u-"), now, account, scope, sign_in_id)
    return session_id


async def test_sessions_list_filter_poll_detail_and_revoke(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, db: Any, clock: ShiftableClock,
) -> None:
    agent = await add_agent(db, tenant, "Session Agent", clock, sessions=1)
    other_agent = await add_agent(db, tenant, "Quiet Agent", clock, sessions=1)
    account = unique("acct-")
    sid = await signed_in_session(db, tenant, agent, account, clock, scope="poppy:read orders:read")
    theirs = await signed_in_session(db, other_tenant, await add_agent(db, other_tenant, "Theirs", clock),
                                     "their-acct", clock)
    csrf = await sign_in(console, tenant.email)
    page = await console.get("/sessions")
    assert page.status_code == 200 and sid in page.text and "Quiet Agent" in page.text
    assert 'hx-trigger="every 5s"' in page.text and theirs not in page.text
    assert "their-acct" not in page.text
    by_account = await console.get("/sessions", params={"account": account})
    assert sid in by_account.text and "Quiet Agent" not in by_account.text
    by_agent = await console.get("/sessions", params={"client_id": other_agent})
    assert sid not in by_agent.text and "Quiet Agent" in by_agent.text
    rows = await console.get("/sessions/rows", params={"account": account}, headers={"HX-Request": "true"})
    assert rows.status_code == 200 and "<html" not in rows.text and sid in rows.text
    detail = await console.get(f"/sessions/{sid}")
    assert detail.status_code == 200
    for fact in ("Created", "Last used", "Signed in since", "orders:read", account):
        assert fact in detail.text
    assert (await console.get(f"/sessions/{theirs}")).status_code == 404
    assert (await console.post(f"/sessions/{theirs}/revoke", data={"confirm": "yes", "_csrf_token": csrf})
            ).status_code == 404

    confirm = await console.get(f"/sessions/{sid}/revoke")
    assert "Revoke this Session?" in confirm.text
    r = await console.post(f"/sessions/{sid}/revoke", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Revoke this Session?" in r.text
    assert await db.fetchval("SELECT ended_at FROM pap_sessions WHERE id = $1", sid) is None
    r = await console.post(f"/sessions/{sid}/revoke", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/sessions?notice=session_revoked"
    row = await db.fetchrow("SELECT ended_at, end_reason FROM pap_sessions WHERE id = $1", sid)
    assert row["ended_at"] is not None and row["end_reason"] == "revoked"
    assert await db.fetchval("SELECT revoked_at FROM sign_ins s JOIN pap_sessions p ON p.tenant_id = s.tenant_id"
                             " AND p.sign_in_id = s.id WHERE p.id = $1", sid) is not None
    assert sid not in (await console.get("/sessions")).text
    audit = await db.fetchrow("SELECT actor_type, details FROM audit_log WHERE tenant_id = $1 AND action = $2",
                              tenant.id, "session.revoked")
    assert audit["actor_type"] == "admin" and audit["details"]["sign_ins_revoked"] == 1
    assert await db.fetchval("SELECT ended_at FROM pap_sessions WHERE id = $1", theirs) is None
    console.cookies.clear()


async def test_accounts_disconnect_one_then_all(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
                                                clock: ShiftableClock) -> None:
    account = unique("acct-")
    one = await add_agent(db, tenant, "Agent One", clock)
    two = await add_agent(db, tenant, "Agent Two", clock)
    s1 = await signed_in_session(db, tenant, one, account, clock)
    s2 = await signed_in_session(db, tenant, two, account, clock)
    csrf = await sign_in(console, tenant.email)
    listing = await console.get("/accounts", params={"q": account[:8]})
    assert account in listing.text
    page = await console.get("/accounts/agents", params={"account": account})
    assert "Agent One" in page.text and "Agent Two" in page.text
    confirm = await console.get("/accounts/disconnect", params={"account": account, "client_id": one})
    assert "Disconnect this agent" in confirm.text
    r = await console.post("/accounts/disconnect", data={"account": account, "client_id": one, "_csrf_token": csrf})
    assert r.status_code == 200  # asked again
    r = await console.post("/accounts/disconnect", data={"account": account, "client_id": one, "confirm": "yes",
                                                         "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT signed_in_at FROM pap_sessions WHERE id = $1", s1) is None
    assert await db.fetchval("SELECT signed_in_at FROM pap_sessions WHERE id = $1", s2) is not None
    page = await console.get("/accounts/agents", params={"account": account})
    assert "Agent One" not in page.text and "Agent Two" in page.text
    r = await console.post("/accounts/disconnect", data={"account": account, "confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT signed_in_at FROM pap_sessions WHERE id = $1", s2) is None
    vias = [r["details"]["via"] for r in await db.fetch(
        "SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'account.disconnected'", tenant.id)]
    assert vias == ["dashboard", "dashboard"]
    console.cookies.clear()


async def test_issuer_settings_save_conflict_and_rotation(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                          db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    page = await console.get("/settings")
    assert page.status_code == 200 and "Sign-in types" in page.text
    version = re.search(r'name="version" value="(\d+)"', page.text).group(1)  # type: ignore[union-attr]
    form = {"_csrf_token": csrf, "version": version, "organization_name": "Renamed Co",
            "custom_scopes": "orders:read: Read your orders", "device_enabled": "on",
            "device_scopes": ["poppy:read", "orders:read"], "session_lifetime_s": "900",
            "dpop_nonce_required": "on", "sessions_per_agent_per_minute": "30",
            "token_requests_per_network_per_minute": "300", "login_url": "", "login_jwks_uri": ""}
    r = await console.post("/settings", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    api = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()
    s = api["settings"]
    assert s["organization_name"] == "Renamed Co" and s["custom_scopes"] == {"orders:read": "Read your orders"}
    assert s["device"] == {"enabled": True, "scopes": ["poppy:read", "orders:read"]}
    assert s["session_lifetime_s"] == 900 and s["dpop_nonce_required"] is True
    assert s["sessions_per_agent_per_minute"] == 30
    # The form was rendered from the old version: a second save with it is a conflict, not an overwrite.
    stale = await console.post("/settings", data={**form, "organization_name": "Stale"})
    assert stale.status_code == 409
    bad = await console.post("/settings", data={**form, "version": str(api["version"]), "session_lifetime_s": "5"})
    assert bad.status_code == 422 and "session_lifetime_s" in bad.text
    assert (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["version"] == api["version"]

    keys_before = await db.fetchval("SELECT count(*) FROM signing_keys WHERE tenant_id = $1", tenant.id)
    confirm = await console.get("/settings/rotate-key")
    assert "Rotate the signing key?" in confirm.text
    r = await console.post("/settings/rotate-key", data={"_csrf_token": csrf})
    assert r.status_code == 200  # asked again
    r = await console.post("/settings/rotate-key", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT count(*) FROM signing_keys WHERE tenant_id = $1", tenant.id) == keys_before + 1
    actions = {r["action"] for r in await db.fetch("SELECT action FROM audit_log WHERE tenant_id = $1", tenant.id)}
    assert {"issuer.settings_updated", "signing_key.rotated"} <= actions
    console.cookies.clear()


async def test_resource_credentials_shown_once_and_revoked_after_confirmation(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, db: Any,
) -> None:
    csrf = await sign_in(console, tenant.email)
    r = await console.post("/resource-credentials", data={"name": "orders api", "_csrf_token": csrf})
    assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
    secret = re.search(r'<code id="new-credential">(fdrs_[^<]+)</code>', r.text).group(1)  # type: ignore[union-attr]
    listing = await console.get("/resource-credentials")
    assert "orders api" in listing.text and secret not in listing.text
    cred_id = await db.fetchval("SELECT id FROM resource_credentials WHERE tenant_id = $1", tenant.id)
    theirs = (await console.post("/api/v1/resource-credentials", json={"name": "b"},
                                 headers=other_tenant.auth)).json()["id"]
    assert (await console.get(f"/resource-credentials/{theirs}/revoke")).status_code == 404
    r = await console.post(f"/resource-credentials/{cred_id}/revoke", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Revoke this credential?" in r.text
    r = await console.post(f"/resource-credentials/{cred_id}/revoke", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT revoked_at FROM resource_credentials WHERE id = $1", cred_id) is not None
    actions = {r["action"] for r in await db.fetch("SELECT action FROM audit_log WHERE tenant_id = $1", tenant.id)}
    assert {"resource_credential.created", "resource_credential.revoked"} <= actions
    console.cookies.clear()


async def test_feedback_is_shown_as_data(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any) -> None:
    await db.execute(
        "INSERT INTO feedback (tenant_id, id, session_id, client_id, user_id, kind, body) VALUES"
        " ($1, $2, 'ses_x', 'https://a.example/agent.json', 'u', 'unsupported_task', $3)",
        tenant.id, new_id("evt"), {"task": "cancel order", "description": "<script>alert(1)</script> please"})
    await sign_in(console, tenant.email)
    page = await console.get("/feedback")
    assert page.status_code == 200 and "cancel order" in page.text
    assert "<script>alert(1)</script>" not in page.text and "&lt;script&gt;" in page.text
    console.cookies.clear()
