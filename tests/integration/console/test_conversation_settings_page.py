"""The dashboard's conversations settings page at the wire (#16, PAP §7): hosted conversations on,
the webhook mode or the relay to one of the tenant's own webhook endpoints (a select of its
endpoints only; another tenant's endpoint ID is refused, as is one whose URL the webhook rules
refuse now), the retention; validation errors shown in the form with a 422, a stale form a 409,
no CSRF token a 403, each save audited; viewers read the form disabled and cannot post it."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in


async def _endpoint(console: AsyncTestClient[Any], t: TenantHandle, url: str) -> str:
    r = await console.post("/api/v1/webhook-endpoints", headers=t.auth, json={"url": url, "description": "relay"})
    assert r.status_code == 201, r.text
    return str(r.json()["endpoint"]["id"])


async def _stored(console: AsyncTestClient[Any], t: TenantHandle) -> dict[str, Any]:
    r = await console.get("/api/v1/issuer", headers=t.auth)
    assert r.status_code == 200
    return dict(r.json())


def _version(page: str) -> str:
    found = re.search(r'name="version" value="(\d+)"', page)
    assert found, page[:500]
    return found.group(1)


async def _save(console: AsyncTestClient[Any], csrf: str, version: str, **fields: str) -> Any:
    return await console.post("/settings/conversations", data={"_csrf_token": csrf, "version": version, **fields},
                              follow_redirects=False)


async def test_turn_on_choose_the_relay_and_back(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                 other_tenant: TenantHandle, db: Any) -> None:
    ours = await _endpoint(console, tenant, f"https://{tenant.slug}.support.example/pap/conversations")
    theirs = await _endpoint(console, other_tenant, f"https://{other_tenant.slug}.support.example/pap")
    csrf = await sign_in(console, tenant.email)

    page = await console.get("/settings/conversations")
    assert page.status_code == 200
    assert 'action="/settings/conversations"' in page.text and 'name="_csrf_token"' in page.text
    assert f'<option value="{ours}"' in page.text and theirs not in page.text  # its own endpoints only
    assert f"/{tenant.slug}/conversations" in page.text  # the hosted endpoint's URL
    assert 'href="/settings/conversations"' in (await console.get("/settings")).text

    # Without the CSRF token nothing is saved.
    r = await console.post("/settings/conversations", data={"version": _version(page.text), "enabled": "on",
                                                            "mode": "webhook", "retention_days": "14"},
                           follow_redirects=False)
    assert r.status_code == 403
    assert (await _stored(console, tenant))["settings"]["conversations"]["enabled"] is False

    r = await _save(console, csrf, _version(page.text), enabled="on", mode="webhook", retention_days="14")
    assert r.status_code == 303 and r.headers["location"] == "/settings/conversations?notice=saved"
    stored = await _stored(console, tenant)
    assert stored["settings"]["conversations"] == {"enabled": True, "retention_days": 14, "relay_endpoint_id": None}

    page = await console.get("/settings/conversations?notice=saved")
    assert "Conversations settings saved" in page.text
    r = await _save(console, csrf, _version(page.text), enabled="on", mode="relay", relay_endpoint_id=ours,
                    retention_days="30")
    assert r.status_code == 303, r.text
    assert (await _stored(console, tenant))["settings"]["conversations"] == {
        "enabled": True, "retention_days": 30, "relay_endpoint_id": ours}
    page = await console.get("/settings/conversations")
    assert re.search(rf'<option value="{ours}" selected>', page.text)
    assert re.search(r'name="mode" value="relay" checked', page.text)
    # The inbox says where messages go, and links here.
    inbox = await console.get("/conversations")
    assert 'id="conversations-relay"' in inbox.text and 'href="/settings/conversations"' in inbox.text

    audited = await db.fetch("SELECT actor_id, details FROM audit_log WHERE tenant_id = $1"
                             " AND action = 'issuer.settings_updated' AND details->>'section' = 'conversations'"
                             " ORDER BY at", tenant.id)
    assert [dict(a["details"])["conversations"] for a in audited] == [
        {"enabled": True, "retention_days": 14, "relay_endpoint_id": None},
        {"enabled": True, "retention_days": 30, "relay_endpoint_id": ours}]
    assert all(dict(a["details"])["via"] == "dashboard" and a["actor_id"] for a in audited)

    # Back to the webhook mode: the chosen endpoint is dropped.
    r = await _save(console, csrf, _version(page.text), enabled="on", mode="webhook", relay_endpoint_id=ours,
                    retention_days="30")
    assert r.status_code == 303
    assert (await _stored(console, tenant))["settings"]["conversations"]["relay_endpoint_id"] is None
    console.cookies.clear()


async def test_refusals_are_shown_in_the_form(console: AsyncTestClient[Any], tenant: TenantHandle,
                                              other_tenant: TenantHandle, db: Any) -> None:
    ours = await _endpoint(console, tenant, f"https://{tenant.slug}.example/relay")
    theirs = await _endpoint(console, other_tenant, f"https://{other_tenant.slug}.example/relay")
    csrf = await sign_in(console, tenant.email)
    version = _version((await console.get("/settings/conversations")).text)
    before = await _stored(console, tenant)
    audits = await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1"
                               " AND action = 'issuer.settings_updated'", tenant.id)

    # Another tenant's endpoint is no endpoint of this organisation (a forged option value).
    r = await _save(console, csrf, version, enabled="on", mode="relay", relay_endpoint_id=theirs, retention_days="30")
    assert r.status_code == 422
    assert "conversations.relay_endpoint_id" in r.text and "no webhook endpoint of this organisation" in r.text
    assert f'<option value="{theirs}"' not in r.text  # never listed as an option

    # The relay mode needs an endpoint; the retention is 1 to 3650 whole days.
    r = await _save(console, csrf, version, enabled="on", mode="relay", relay_endpoint_id="", retention_days="30")
    assert r.status_code == 422 and "choose one of your webhook endpoints" in r.text
    r = await _save(console, csrf, version, enabled="on", mode="webhook", retention_days="ten")
    assert r.status_code == 422 and "conversations.retention_days" in r.text and 'value="ten"' in r.text
    r = await _save(console, csrf, version, enabled="on", mode="webhook", retention_days="4000")
    assert r.status_code == 422 and "must be between 1 and 3650" in r.text
    r = await _save(console, csrf, version, enabled="on", mode="webhook", retention_days="0")
    assert r.status_code == 422 and "conversations.retention_days" in r.text
    r = await _save(console, csrf, version, enabled="on", mode="relay", relay_endpoint_id="not an id",
                    retention_days="30")
    assert r.status_code == 422 and "whe_" in r.text

    # An endpoint registered under an allowlist since narrowed (its URL is private now) is refused.
    await db.execute("UPDATE webhook_endpoints SET url = 'https://10.0.0.7/relay' WHERE tenant_id = $1 AND id = $2",
                     tenant.id, ours)
    r = await _save(console, csrf, version, enabled="on", mode="relay", relay_endpoint_id=ours, retention_days="30")
    assert r.status_code == 422 and "not a public address" in r.text

    # Hosted conversations replace the company's own conversation endpoint.
    settings = before["settings"]
    settings["conversation_endpoint"] = f"https://{tenant.slug}.example/pap/conversations"
    put = await console.put("/api/v1/issuer", json=settings, headers=tenant.auth)
    assert put.status_code == 200, put.text
    page = await console.get("/settings/conversations")
    assert "conversation_endpoint" in page.text
    r = await _save(console, csrf, _version(page.text), enabled="on", mode="webhook", retention_days="30")
    assert r.status_code == 422 and "conversations.enabled" in r.text

    # A form rendered before someone else's change is a conflict, not an overwrite.
    r = await _save(console, csrf, version, mode="webhook", retention_days="7")
    assert r.status_code == 409
    after = await _stored(console, tenant)
    assert after["settings"]["conversations"] == before["settings"]["conversations"]
    assert after["version"] == before["version"] + 1  # only the API's own PUT
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1"
                             " AND action = 'issuer.settings_updated'", tenant.id) == audits + 1
    console.cookies.clear()


async def test_viewers_read_only(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any) -> None:
    ours = await _endpoint(console, tenant, f"https://{tenant.slug}.example/relay")
    viewer = await add_admin(db, tenant, "viewer")
    csrf = await sign_in(console, viewer)
    page = await console.get("/settings/conversations")
    assert page.status_code == 200
    assert "<fieldset disabled>" in page.text and 'action="/settings/conversations"' not in page.text
    assert f'<option value="{ours}"' in page.text
    assert 'name="version"' not in page.text
    before = await _stored(console, tenant)
    r = await _save(console, csrf, str(before["version"]), enabled="on", mode="relay", relay_endpoint_id=ours,
                    retention_days="30")
    assert r.status_code == 403
    assert (await _stored(console, tenant))["version"] == before["version"]
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1"
                             " AND action = 'issuer.settings_updated'", tenant.id) == 0
    console.cookies.clear()
