"""The admin dashboard at the wire: pages, tenant isolation, CSRF, roles, confirm-then-act, CSV.

Browser (Playwright) journeys are in ``tests/browser``; the role walk over every route is
``test_role_walk.py``.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from frontdoor_core.ids import new_id
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.credentials.password import hash_password
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.integration.console.test_admin_login import login
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS

PAGES = ["/", "/domains", "/agents", "/api-keys", "/audit", "/sessions", "/accounts", "/settings",
         "/resource-credentials", "/feedback", "/team", "/account/password", "/operations", "/webhooks",
         "/operation-kinds"]


def _csrf(html: str) -> str:
    m = re.search(r'name="_csrf_token" value="([^"]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def _meta_csrf(html: str) -> str:
    m = re.search(r'<meta name="csrf-token" content="([^"]+)"', html)
    assert m, "no CSRF meta tag"
    return m.group(1)


async def sign_in(client: AsyncTestClient[Any], email: str) -> str:
    """Sign in afresh; answer a CSRF token for later POSTs."""
    client.cookies.clear()
    r = await login(client, email, STRONG_PASSWORD)
    assert r.status_code == 303, r.text
    page = await client.get("/")
    assert page.status_code == 200
    return _csrf(page.text)


async def add_admin(db: Any, tenant: TenantHandle, role: str) -> str:
    email = f"{unique(role + '-')}@example.com"
    await db.execute(
        "INSERT INTO admins (tenant_id, id, email, password_hash, role) VALUES ($1, $2, $3, $4, $5)",
        tenant.id, new_id("adm"), email, hash_password(STRONG_PASSWORD), role,
    )
    return email


async def add_agent(db: Any, tenant: TenantHandle, name: str, clock: ShiftableClock, *, sessions: int = 0) -> str:
    client_id = f"https://{unique('agent-')}.example/agent.json"
    now = clock()
    await db.execute(
        "INSERT INTO agents (tenant_id, client_id, client_name, first_seen_at, last_seen_at)"
        " VALUES ($1, $2, $3, $4, $4)", tenant.id, client_id, name, now,
    )
    for _ in range(sessions):
        await db.execute(
            "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
            " VALUES ($1, $2, $3, $4, $5, $5)", tenant.id, new_id("ses"), client_id, unique("user-"), now,
        )
    return client_id


async def test_signed_out_pages_go_to_login(console: AsyncTestClient[Any]) -> None:
    console.cookies.clear()
    for path in [*PAGES, "/audit.csv", "/agents/block?client_id=https://a.example/x"]:
        r = await console.get(path, follow_redirects=False)
        assert r.status_code == 303, path
        assert r.headers["location"] == "/login"
    r = await console.get("/domains", headers={"HX-Request": "true"}, follow_redirects=False)
    assert r.status_code == 401 and r.headers["hx-redirect"] == "/login"


async def test_every_page_shows_only_the_signed_in_tenant(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, db: Any, clock: ShiftableClock,
) -> None:
    mine = f"{unique('mine-')}.example"
    theirs = f"{unique('theirs-')}.example"
    assert (await console.post("/api/v1/domains", json={"domain": mine}, headers=tenant.auth)).status_code == 201
    assert (await console.post("/api/v1/domains", json={"domain": theirs},
                               headers=other_tenant.auth)).status_code == 201
    my_agent = await add_agent(db, tenant, "My Helper", clock, sessions=2)
    their_agent = await add_agent(db, other_tenant, "Their Helper", clock, sessions=1)

    await sign_in(console, tenant.email)
    pages = {p: await console.get(p) for p in PAGES}
    for path, r in pages.items():
        assert r.status_code == 200, path
        assert f"Org {tenant.slug}" in r.text, path
        assert tenant.email in r.text, path
        assert r.headers["cache-control"] == "no-store", path
        for leak in (f"Org {other_tenant.slug}", other_tenant.email, theirs, their_agent, "Their Helper"):
            assert leak not in r.text, (path, leak)
    overview = pages["/"].text
    assert '<span data-count="domains-pending">1</span>' in overview
    assert 'data-count="agents-seen">1<' in overview
    assert 'data-count="live-sessions">2<' in overview
    assert 'data-count="api-keys">1<' in overview
    assert mine in pages["/domains"].text
    assert "_frontdoor-challenge." + mine in pages["/domains"].text
    assert my_agent in pages["/agents"].text and "My Helper" in pages["/agents"].text
    assert "domain.added" in pages["/audit"].text
    # Another tenant's objects are the same 404 as none, whatever the URL says.
    csrf = _csrf(pages["/domains"].text)
    r = await console.post(f"/domains/{theirs}/verify", data={"_csrf_token": csrf})
    assert r.status_code == 404
    assert (await console.get(f"/domains/{theirs}/poppy.json")).status_code == 404
    their_key = (await console.get("/api/v1/api-keys", headers=other_tenant.auth)).json()["data"][0]["id"]
    assert (await console.get(f"/api-keys/{their_key}/revoke")).status_code == 404
    console.cookies.clear()


async def test_pages_carry_a_strict_csp_and_load_only_own_scripts(console: AsyncTestClient[Any],
                                                                  tenant: TenantHandle) -> None:
    await sign_in(console, tenant.email)
    for path in PAGES:
        r = await console.get(path)
        csp = r.headers["content-security-policy"]
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", r.text, re.S)
        assert scripts, path
        for attrs, body in scripts:
            assert body.strip() == "", "no inline script"
            assert 'src="/static/' in attrs
        assert "style=" not in r.text
        assert _meta_csrf(r.text)
    js = await console.get("/static/vendor/htmx/htmx.min.js")
    assert js.status_code == 200 and "htmx" in js.text
    assert (await console.get("/static/dashboard.js")).status_code == 200
    console.cookies.clear()


async def test_posts_without_csrf_are_refused(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
                                              clock: ShiftableClock) -> None:
    agent = await add_agent(db, tenant, "CSRF target", clock)
    await sign_in(console, tenant.email)
    for path, data in [("/domains", {"domain": f"{unique('x-')}.example"}),
                       ("/agents/block", {"client_id": agent, "confirm": "yes"}),
                       ("/api-keys", {"name": "sneaky"})]:
        r = await console.post(path, data=data, follow_redirects=False)
        assert r.status_code == 403, path
        r = await console.post(path, data=data, headers={"x-csrftoken": "forged"}, follow_redirects=False)
        assert r.status_code == 403, path
    assert await db.fetchval("SELECT blocked_at FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             tenant.id, agent) is None
    assert await db.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id = $1", tenant.id) == 1
    console.cookies.clear()


async def test_viewer_sees_but_every_change_is_refused(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                       db: Any, clock: ShiftableClock) -> None:
    viewer = await add_admin(db, tenant, "viewer")
    agent = await add_agent(db, tenant, "Viewer target", clock, sessions=1)
    key_id = (await console.get("/api/v1/api-keys", headers=tenant.auth)).json()["data"][0]["id"]
    csrf = await sign_in(console, viewer)
    domains = await console.get("/domains")
    assert domains.status_code == 200 and "viewer" in domains.text
    assert 'action="/domains"' not in domains.text  # no add form for a viewer
    for path, data in [("/domains", {"domain": f"{unique('v-')}.example"}),
                       ("/domains/whatever.example/verify", {}),
                       ("/agents/block", {"client_id": agent, "confirm": "yes"}),
                       ("/agents/unblock", {"client_id": agent, "confirm": "yes"}),
                       ("/api-keys", {"name": "viewer key"}),
                       (f"/api-keys/{key_id}/revoke", {"confirm": "yes"})]:
        r = await console.post(path, data={**data, "_csrf_token": csrf}, follow_redirects=False)
        assert r.status_code == 403, path
    assert await db.fetchval("SELECT blocked_at FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             tenant.id, agent) is None
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1 AND ended_at IS NULL",
                              tenant.id) == 1
    assert await db.fetchval("SELECT revoked_at FROM api_keys WHERE id = $1", key_id) is None
    assert await db.fetchval("SELECT count(*) FROM domains WHERE tenant_id = $1", tenant.id) == 0
    console.cookies.clear()


async def test_block_agent_asks_first_then_ends_its_sessions(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                             db: Any, clock: ShiftableClock) -> None:
    agent = await add_agent(db, tenant, "Pushy Agent", clock, sessions=2)
    csrf = await sign_in(console, tenant.email)
    confirm = await console.get("/agents/block", params={"client_id": agent})
    assert confirm.status_code == 200
    assert "Block this agent?" in confirm.text and agent in confirm.text
    assert 'name="confirm" value="yes"' in confirm.text
    # Posting without the confirmation only asks again.
    r = await console.post("/agents/block", data={"client_id": agent, "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 200 and "Block this agent?" in r.text
    assert await db.fetchval("SELECT blocked_at FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             tenant.id, agent) is None
    r = await console.post("/agents/block", data={"client_id": agent, "confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/agents?notice=agent_blocked"
    assert await db.fetchval("SELECT blocked_at FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             tenant.id, agent) is not None
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1 AND ended_at IS NULL",
                              tenant.id) == 0
    row = await db.fetchrow("SELECT actor_type, details FROM audit_log WHERE tenant_id = $1 AND action = $2",
                            tenant.id, "agent.blocked")
    assert row["actor_type"] == "admin" and row["details"]["sessions_ended"] == 2
    page = await console.get("/agents?notice=agent_blocked")
    assert "Agent blocked" in page.text and "Unblock…" in page.text
    # Unblock is confirmed too, and audited.
    r = await console.post("/agents/unblock", data={"client_id": agent, "confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'agent.unblocked'",
                             tenant.id) == 1
    # A malformed client_id is refused, not acted on.
    bad = await console.post("/agents/block", data={"client_id": "javascript:alert(1)", "confirm": "yes",
                                                    "_csrf_token": csrf})
    assert bad.status_code == 422
    console.cookies.clear()


async def test_api_key_is_shown_once_and_revoked_after_confirmation(console: AsyncTestClient[Any],
                                                                    tenant: TenantHandle, db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    r = await console.post("/api-keys", data={"name": "deploys", "_csrf_token": csrf})
    assert r.status_code == 201
    assert r.headers["cache-control"] == "no-store"
    secret = re.search(r'<code id="new-api-key">([^<]+)</code>', r.text).group(1)  # type: ignore[union-attr]
    assert (await console.get("/api/v1/api-keys", headers={"Authorization": f"Bearer {secret}"})).status_code == 200
    listing = await console.get("/api-keys")
    assert "deploys" in listing.text and secret not in listing.text
    key_id = await db.fetchval("SELECT id FROM api_keys WHERE tenant_id = $1 AND name = 'deploys'", tenant.id)
    confirm = await console.get(f"/api-keys/{key_id}/revoke")
    assert confirm.status_code == 200 and "Revoke this API key?" in confirm.text
    r = await console.post(f"/api-keys/{key_id}/revoke", data={"_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 200 and "Revoke this API key?" in r.text
    assert await db.fetchval("SELECT revoked_at FROM api_keys WHERE id = $1", key_id) is None
    r = await console.post(f"/api-keys/{key_id}/revoke", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert (await console.get("/api/v1/api-keys", headers={"Authorization": f"Bearer {secret}"})).status_code == 401
    actions = {r["action"] for r in await db.fetch("SELECT action FROM audit_log WHERE tenant_id = $1", tenant.id)}
    assert {"api_key.created", "api_key.revoked"} <= actions
    console.cookies.clear()


async def test_non_owner_admin_cannot_manage_keys(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                  db: Any) -> None:
    admin = await add_admin(db, tenant, "admin")
    csrf = await sign_in(console, admin)
    r = await console.post("/api-keys", data={"name": "nope", "_csrf_token": csrf})
    assert r.status_code == 403
    console.cookies.clear()


async def test_domains_add_verify_with_htmx_and_poppy_json(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                           dns: LocalDNS, db: Any) -> None:
    domain = f"{unique('dash-')}.example"
    csrf = await sign_in(console, tenant.email)
    bad = await console.post("/domains", data={"domain": "not a domain", "_csrf_token": csrf})
    assert bad.status_code == 422 and 'role="alert"' in bad.text
    r = await console.post("/domains", data={"domain": domain, "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    page = await console.get("/domains?notice=domain_added")
    value = await db.fetchval("SELECT challenge_token FROM domains WHERE tenant_id = $1 AND domain = $2",
                              tenant.id, domain)
    assert f'"frontdoor-verify={value}"' in page.text
    assert 'data-copy="txt-' in page.text
    assert (await console.get(f"/domains/{domain}/poppy.json")).status_code == 409  # not verified yet
    dns.set_txt(f"_frontdoor-challenge.{domain}", [f"frontdoor-verify={value}"])
    try:
        r = await console.post(f"/domains/{domain}/verify",
                               headers={"HX-Request": "true", "x-csrftoken": _meta_csrf(page.text)})
    finally:
        dns.remove(f"_frontdoor-challenge.{domain}")
    assert r.status_code == 200
    assert r.text.lstrip().startswith("<tr") and "<html" not in r.text
    assert "status-verified" in r.text and f"/domains/{domain}/poppy.json" in r.text
    doc = await console.get(f"/domains/{domain}/poppy.json")
    assert doc.status_code == 200 and doc.headers["content-type"].startswith("application/json")
    assert tenant.slug in doc.text
    console.cookies.clear()


async def test_audit_log_filters_and_exports_csv(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    await console.post("/api/v1/domains", json={"domain": f"{unique('a-')}.example"}, headers=tenant.auth)
    await sign_in(console, tenant.email)
    filtered = await console.get("/audit", params={"action": "domain.added"})
    assert filtered.status_code == 200
    assert "domain.added" in filtered.text and "<code>admin.signed_in</code>" not in filtered.text
    everything = await console.get("/audit")
    assert "<code>admin.signed_in</code>" in everything.text
    r = await console.get("/audit.csv", params={"action": "domain.added"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(r.text)))
    assert rows[0][:5] == ["id", "at", "actor_type", "actor_id", "action"]
    assert len(rows) >= 2 and all(row[4] == "domain.added" for row in rows[1:])
    assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row)
    console.cookies.clear()


async def test_two_tenant_walk_of_every_dashboard_route(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, db: Any, clock: ShiftableClock,
    runtime: Runtime,
) -> None:
    """Every GET route of the dashboard, read from the app, as tenant A with tenant B's objects in the URL."""
    from tests.integration.console.test_dashboard_pages import signed_in_session
    from tests.integration.console.test_operation_pages import add_endpoint, add_kind, add_operation

    b = other_tenant
    b_agent = await add_agent(db, b, "B Secret Agent", clock)
    b_account = unique("b-acct-")
    b_session = await signed_in_session(db, b, b_agent, b_account, clock)
    b_domain = f"{unique('b-')}.example"
    await console.post("/api/v1/domains", json={"domain": b_domain}, headers=b.auth)
    b_cred = (await console.post("/api/v1/resource-credentials", json={"name": "b-cred-name"}, headers=b.auth)).json()
    b_key = (await console.get("/api/v1/api-keys", headers=b.auth)).json()["data"][0]["id"]
    b_member = await add_admin(db, b, "viewer")
    b_member_id = await db.fetchval("SELECT id FROM admins WHERE email = $1", b_member)
    await sign_in(console, b.email)
    b_csrf = _csrf((await console.get("/team")).text)
    b_invitee = f"{unique('b-inv-')}@example.com"
    assert (await console.post("/team/invites", data={"email": b_invitee, "role": "viewer",
                                                      "_csrf_token": b_csrf})).status_code == 201
    b_invite = await db.fetchval("SELECT id FROM admin_invites WHERE email = $1", b_invitee)
    await db.execute("INSERT INTO feedback (tenant_id, id, session_id, client_id, user_id, kind, body)"
                     " VALUES ($1, $2, $3, $4, 'u', 'k', $5)", b.id, new_id("evt"), b_session, b_agent,
                     {"task": "b-feedback-task", "description": "b"})
    b_endpoint_url = f"https://{unique('b-hooks-')}.example/perform"
    b_endpoint = await add_endpoint(console, b, url=b_endpoint_url, event_types=["operation.confirmed"])
    b_kind = await add_kind(console, b, b_endpoint, name=unique("bkind.secret-"))
    b_op = await add_operation(runtime, b.id, b_kind, client_id=b_agent, account=b_account,
                               summary="B secret operation summary", confirm=True)
    b_message = b_op.perform_message_id
    assert b_message is not None
    leaks = [f"Org {b.slug}", b.email, b_endpoint_url, b_kind, b_op.id, b_message, "B secret operation summary", b_agent, "B Secret Agent", b_session, b_account, b_domain, "b-cred-name",
             b_member, b_invitee, "b-feedback-task", b_cred["prefix"]]
    params = {"session_id": b_session, "member_id": b_member_id, "invite_id": b_invite, "cred_id": b_cred["id"],
              "key_id": b_key, "domain": b_domain, "token": "not-a-token", "operation_id": b_op.id,
              "endpoint_id": b_endpoint, "message_id": b_message, "name": b_kind}
    query = {"client_id": b_agent, "account": b_account, "q": b_account[:6]}

    await sign_in(console, tenant.email)
    walked = []
    for route in console.app.routes:
        if not isinstance(route, HTTPRoute) or route.path.startswith(("/api/", "/static", "/healthz", "/readyz",
                                                                        "/schema", "/_openapi")):
            continue
        # Public pages of nobody's tenant: sign-in, sign-up, and the domain scanner (any domain; docs/scanner.md).
        if not any("GET" in h.http_methods for h in route.route_handlers) or route.path in (
                "/login", "/signup", "/scan/{domain:str}"):
            continue
        # The inbox's own event stream holds the connection open (tenant A's inbox, for minutes):
        # tested on its own in test_conversation_stream.py. A conversation's stream is walked
        # (B's conversation in the URL: 404 before any streaming).
        if route.path == "/conversations/stream":
            continue
        path = re.sub(r"\{(\w+):\w+\}", lambda m: params.get(m.group(1), "block"), route.path)
        r = await console.get(path, params=query)
        walked.append(route.path)
        if "{" in route.path and not route.path.startswith("/agents/"):
            assert r.status_code == 404, (route.path, r.status_code)
        else:
            assert r.status_code in (200, 404), (route.path, r.status_code)
        body = r.text
        for v in query.values():  # filter forms show what was typed into them
            body = body.replace(f'value="{v}"', "").replace(f"={v}", "")
        if route.path.startswith(("/agents/", "/accounts/disconnect", "/accounts/agents")):
            # Confirmation pages repeat the identifier typed into the URL, and nothing about it.
            body = body.replace(b_agent, "").replace(b_account, "")
        for leak in leaks:
            assert leak not in body, (route.path, leak)
    assert {"/sessions", "/sessions/{session_id:str}", "/accounts/agents", "/team", "/settings",
            "/resource-credentials/{cred_id:str}/revoke", "/feedback", "/operations", "/operations/rows",
            "/operations/{operation_id:str}", "/operations/{operation_id:str}/delivery",
            "/operations/{operation_id:str}/redeliver", "/webhooks", "/webhooks/{endpoint_id:str}",
            "/webhooks/{endpoint_id:str}/messages", "/webhooks/{endpoint_id:str}/recover",
            "/webhooks/messages/{message_id:str}", "/webhooks/messages/{message_id:str}/attempts",
            "/webhooks/messages/{message_id:str}/redeliver", "/operation-kinds", "/operation-kinds/{name:str}",
            "/operation-kinds/{name:str}/delete"} <= set(walked)
    console.cookies.clear()
