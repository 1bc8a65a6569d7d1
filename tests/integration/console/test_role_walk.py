"""Walk every route of the console app: each one that can change something refuses a
viewer (dashboard cookie or viewer API key) with 403, and each owner-only one refuses an
admin too. Routes are read from the app itself, so routes added later are covered
without touching this file; only a new *public* route has to be named here on purpose.
"""

from __future__ import annotations

import re
from typing import Any

from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
# Routes anyone may call: they authenticate in their own way (or act on the caller's own
# account). Adding one is a security decision, hence this explicit list.
PUBLIC = {
    ("POST", "/api/v1/signup"), ("POST", "/login"), ("POST", "/logout"), ("POST", "/signup"),
    ("POST", "/invite/{token:str}"),
    ("POST", "/billing/stripe/webhook"),  # Stripe calls it; only its Stripe-Signature is trusted
}
# Unsafe methods that change nothing, so every member may call them.
READ_ONLY = {("POST", "/api/v1/domains/{domain:str}/publish-check"), ("POST", "/account/password")}
_PARAM = re.compile(r"\{(\w+):(\w+)\}")
_SAMPLE = {"int": "1", "uuid": "00000000-0000-4000-8000-000000000000", "path": "x/y"}


def _unsafe_routes(app: Any) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            for method in sorted(handler.http_methods & UNSAFE):
                out.append((method, route.path, dict(handler.opt)))
    return out


def _concrete(path: str) -> str:
    return _PARAM.sub(lambda m: _SAMPLE.get(m.group(2), "nothing-here"), path)


async def test_every_unsafe_route_refuses_a_viewer(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                   db: Any) -> None:
    routes = _unsafe_routes(console.app)
    assert len(routes) > 30, "the walk found too few routes to be walking the app"
    declared_public = {(m, p) for m, p, o in routes if o.get("permission") == "public"}
    assert declared_public == PUBLIC, "a route became public: review it, then list it here"
    declared_read = {(m, p) for m, p, o in routes if o.get("permission") == "read"}
    assert declared_read == READ_ONLY, "an unsafe route is declared read-only: review it, then list it here"

    viewer_key = (await console.post("/api/v1/api-keys", json={"name": "ro", "role": "viewer"},
                                     headers=tenant.auth)).json()["api_key"]
    viewer = await add_admin(db, tenant, "viewer")
    csrf = await sign_in(console, viewer)
    before = await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1", tenant.id)
    checked = []
    for method, path, _opt in routes:
        if (method, path) in PUBLIC | READ_ONLY:
            continue
        url = _concrete(path)
        if path.startswith("/api/"):
            r = await console.request(method, url, json={}, headers={"Authorization": f"Bearer {viewer_key}"})
            assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
            assert r.headers["content-type"].startswith("application/problem+json"), (method, path)
        else:
            r = await console.request(method, url, data={"confirm": "yes", "_csrf_token": csrf},
                                      headers={"x-csrftoken": csrf}, follow_redirects=False)
            assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
        checked.append((method, path))
    assert len(checked) >= 25
    # Nothing was done on the viewer's behalf.
    after = await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action <> 'admin.signed_in'",
                              tenant.id)
    assert after <= before
    console.cookies.clear()


async def test_owner_only_routes_refuse_an_admin(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                 db: Any) -> None:
    routes = [(m, p, o) for m, p, o in _unsafe_routes(console.app)
              if o.get("permission") in ("manage_members", "manage_api_keys")]
    paths = {p for _, p, _ in routes}
    assert {"/api/v1/api-keys", "/api-keys", "/team/invites", "/team/members/{member_id:str}/remove"} <= paths
    admin_key = (await console.post("/api/v1/api-keys", json={"name": "rw", "role": "admin"},
                                    headers=tenant.auth)).json()["api_key"]
    admin = await add_admin(db, tenant, "admin")
    csrf = await sign_in(console, admin)
    for method, path, _ in routes:
        url = _concrete(path)
        if path.startswith("/api/"):
            r = await console.request(method, url, json={"name": "x"}, headers={"Authorization": f"Bearer {admin_key}"})
            assert r.status_code == 403 and r.json()["code"] == "owner_required", (method, path)
        else:
            r = await console.request(method, url, data={"confirm": "yes", "_csrf_token": csrf, "email": "a@b.example"},
                                      headers={"x-csrftoken": csrf}, follow_redirects=False)
            assert r.status_code == 403, (method, path)
    # An admin still does what admins do.
    r = await console.post("/resource-credentials", data={"name": "allowed", "_csrf_token": csrf})
    assert r.status_code == 201
    console.cookies.clear()


async def test_api_key_roles(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any) -> None:
    made = await console.post("/api/v1/api-keys", json={"name": "reader", "role": "viewer"}, headers=tenant.auth)
    assert made.status_code == 201 and made.json()["role"] == "viewer"
    reader = {"Authorization": f"Bearer {made.json()['api_key']}"}
    assert (await console.get("/api/v1/domains", headers=reader)).status_code == 200
    r = await console.post("/api/v1/domains", json={"domain": "viewer-cannot.example"}, headers=reader)
    assert r.status_code == 403 and r.json()["code"] == "read_only"
    # The default is admin-equivalent: it changes things but manages no keys.
    default = (await console.post("/api/v1/api-keys", json={"name": "ci"}, headers=tenant.auth)).json()
    assert default["role"] == "admin"
    ci = {"Authorization": f"Bearer {default['api_key']}"}
    assert (await console.post("/api/v1/signing-keys/rotate", headers=ci)).status_code == 201
    assert (await console.post("/api/v1/api-keys", json={"name": "escalate", "role": "owner"},
                               headers=ci)).status_code == 403
    listed = (await console.get("/api/v1/api-keys", headers=tenant.auth)).json()["data"]
    assert {k["name"]: k["role"] for k in listed}["Created at sign-up"] == "owner"
    assert await db.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND name = 'escalate'",
                             tenant.id) == 0
