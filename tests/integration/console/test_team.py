"""The Team page and one's own password: invitations (shown once, hashed, expiring, one
use), role changes, removals (never the last owner), password change (re-authenticates,
rotates the cookie); every step audited."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Any

from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.integration.console.test_admin_login import csrf_token, login
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.support.clock import ShiftableClock

NEW_PASSWORD = "another long passphrase 97"


async def _actions(db: Any, tenant: TenantHandle) -> list[str]:
    return [r["action"] for r in await db.fetch("SELECT action FROM audit_log WHERE tenant_id = $1 ORDER BY id",
                                                tenant.id)]


async def _invite(console: AsyncTestClient[Any], csrf: str, email: str, role: str) -> str:
    r = await console.post("/team/invites", data={"email": email, "role": role, "_csrf_token": csrf})
    assert r.status_code == 201, r.text
    assert r.headers["cache-control"] == "no-store"
    m = re.search(r'<code id="invite-link">[^<]*/invite/([A-Za-z0-9_-]+)</code>', r.text)
    assert m, "the invitation link is shown"
    return m.group(1)


async def test_invite_accept_and_sign_in(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any) -> None:
    csrf = await sign_in(console, tenant.email)
    email = f"{unique('new-')}@example.com"
    token = await _invite(console, csrf, email, "admin")
    stored = await db.fetchrow("SELECT token_hash, role, expires_at, created_at FROM admin_invites"
                               " WHERE tenant_id = $1 AND email = $2", tenant.id, email)
    assert stored["token_hash"] == hashlib.sha256(token.encode()).digest()  # only the hash is kept
    assert stored["expires_at"] - stored["created_at"] == timedelta(days=7)
    page = await console.get("/team")
    assert email in page.text and token not in page.text  # listed, link never shown again
    console.cookies.clear()

    join = await console.get(f"/invite/{token}")
    assert join.status_code == 200 and email in join.text and "admin" in join.text
    form_csrf = re.search(r'name="_csrf_token" value="([^"]+)"', join.text).group(1)  # type: ignore[union-attr]
    weak = await console.post(f"/invite/{token}", data={"password": "short", "_csrf_token": form_csrf})
    assert weak.status_code == 422
    r = await console.post(f"/invite/{token}", data={"password": STRONG_PASSWORD, "_csrf_token": form_csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    home = await console.get("/")
    assert home.status_code == 200 and email in home.text and "role-admin" in home.text
    # One use only.
    console.cookies.clear()
    again = await console.get(f"/invite/{token}")
    assert again.status_code == 404 and "not valid" in again.text
    assert (await login(console, email, STRONG_PASSWORD)).status_code == 303
    assert {"member.invited", "member.joined"} <= set(await _actions(db, tenant))
    console.cookies.clear()


async def test_invites_expire_and_can_be_withdrawn(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
                                                   clock: ShiftableClock) -> None:
    csrf = await sign_in(console, tenant.email)
    late = await _invite(console, csrf, f"{unique('late-')}@example.com", "viewer")
    gone_email = f"{unique('gone-')}@example.com"
    gone = await _invite(console, csrf, gone_email, "viewer")
    invite_id = await db.fetchval("SELECT id FROM admin_invites WHERE tenant_id = $1 AND email = $2",
                                  tenant.id, gone_email)
    confirm = await console.get(f"/team/invites/{invite_id}/revoke")
    assert "Withdraw this invitation?" in confirm.text
    r = await console.post(f"/team/invites/{invite_id}/revoke", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert (await console.get(f"/invite/{gone}")).status_code == 404
    clock.advance(days=7, seconds=1)
    assert (await console.get(f"/invite/{late}")).status_code == 404
    assert "member.invite_revoked" in await _actions(db, tenant)
    console.cookies.clear()


async def test_invite_refuses_a_member_and_bad_input(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                              other_tenant: TenantHandle) -> None:
    csrf = await sign_in(console, tenant.email)
    r = await console.post("/team/invites", data={"email": tenant.email.upper(), "role": "viewer", "_csrf_token": csrf})
    assert r.status_code == 422 and "already a member of your team" in r.text
    r = await console.post("/team/invites", data={"email": "not an email", "role": "viewer", "_csrf_token": csrf})
    assert r.status_code == 422
    r = await console.post("/team/invites", data={"email": "x@y.example", "role": "root", "_csrf_token": csrf})
    assert r.status_code == 422
    console.cookies.clear()


async def test_roles_change_but_never_leave_the_team_without_an_owner(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
) -> None:
    owner_id = await db.fetchval("SELECT id FROM admins WHERE tenant_id = $1 AND role = 'owner'", tenant.id)
    member = await add_admin(db, tenant, "viewer")
    member_id = await db.fetchval("SELECT id FROM admins WHERE email = $1", member)
    csrf = await sign_in(console, tenant.email)
    # The last owner cannot be demoted or removed.
    r = await console.post(f"/team/members/{owner_id}/role", data={"role": "admin", "_csrf_token": csrf})
    assert r.status_code == 409 and "at least one owner" in r.text
    r = await console.post(f"/team/members/{owner_id}/remove", data={"confirm": "yes", "_csrf_token": csrf})
    assert r.status_code == 409
    assert await db.fetchval("SELECT role FROM admins WHERE id = $1", owner_id) == "owner"
    # Promote the viewer to owner; then the first owner may step down.
    r = await console.post(f"/team/members/{member_id}/role", data={"role": "owner", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    r = await console.post(f"/team/members/{owner_id}/role", data={"role": "admin", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT role FROM admins WHERE id = $1", owner_id) == "admin"
    # The session follows the role at once: the former owner can no longer manage the team.
    r = await console.post("/team/invites", data={"email": "z@z.example", "role": "viewer", "_csrf_token": csrf})
    assert r.status_code == 403
    changes = await db.fetch("SELECT details FROM audit_log WHERE tenant_id = $1 AND action = 'member.role_changed'"
                             " ORDER BY id", tenant.id)
    assert [(c["details"]["from"], c["details"]["to"]) for c in changes] == [("viewer", "owner"), ("owner", "admin")]
    console.cookies.clear()


async def test_removing_a_member_asks_first_and_ends_their_sessions(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
) -> None:
    member = await add_admin(db, tenant, "admin")
    member_id = await db.fetchval("SELECT id FROM admins WHERE email = $1", member)
    await sign_in(console, member)
    member_cookie = console.cookies.get("fd_session")
    csrf = await sign_in(console, tenant.email)
    confirm = await console.get(f"/team/members/{member_id}/remove")
    assert "Remove this member?" in confirm.text and member in confirm.text
    r = await console.post(f"/team/members/{member_id}/remove", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Remove this member?" in r.text  # asked again, nothing done
    assert await db.fetchval("SELECT count(*) FROM admins WHERE id = $1", member_id) == 1
    r = await console.post(f"/team/members/{member_id}/remove", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT count(*) FROM admins WHERE id = $1", member_id) == 0
    console.cookies.clear()
    console.cookies.set("fd_session", member_cookie or "")
    assert (await console.get("/", follow_redirects=False)).headers["location"] == "/login"
    assert (await login(console, member, STRONG_PASSWORD)).status_code == 401
    row = await db.fetchrow("SELECT actor_id, details FROM audit_log WHERE tenant_id = $1 AND action = 'member.removed'",
                            tenant.id)
    assert row["details"]["email"] == member
    console.cookies.clear()


async def test_password_change_reauthenticates_and_rotates_the_cookie(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any,
) -> None:
    email = await add_admin(db, tenant, "viewer")  # any role may change its own password
    csrf = await sign_in(console, email)
    old_cookie = console.cookies.get("fd_session")
    r = await console.post("/account/password", data={"current_password": "wrong wrong wrong", "_csrf_token": csrf,
                                                      "new_password": NEW_PASSWORD})
    assert r.status_code == 422 and "current password" in r.text
    r = await console.post("/account/password", data={"current_password": STRONG_PASSWORD, "_csrf_token": csrf,
                                                      "new_password": "password"})
    assert r.status_code == 422
    r = await console.post("/account/password", data={"current_password": STRONG_PASSWORD, "_csrf_token": csrf,
                                                      "new_password": NEW_PASSWORD}, follow_redirects=False)
    assert r.status_code == 303
    new_cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("fd_session="))
    assert old_cookie not in new_cookie
    assert (await console.get("/account/password?notice=changed")).status_code == 200
    console.cookies.clear()
    console.cookies.set("fd_session", old_cookie or "")
    assert (await console.get("/", follow_redirects=False)).status_code == 303  # the old cookie is dead
    console.cookies.clear()
    assert (await login(console, email, STRONG_PASSWORD)).status_code == 401
    assert (await login(console, email, NEW_PASSWORD)).status_code == 303
    assert "admin.password_changed" in await _actions(db, tenant)
    console.cookies.clear()


async def test_signup_page_creates_a_tenant_and_shows_its_key_once(console: AsyncTestClient[Any], db: Any) -> None:
    console.cookies.clear()
    page = await console.get("/signup")
    assert page.status_code == 200
    slug = unique("web-")
    token = await csrf_token(console)
    data = {"organization_name": "Web Co", "slug": slug, "email": f"{slug}@example.com", "_csrf_token": token}
    weak = await console.post("/signup", data={**data, "password": "123"})
    assert weak.status_code == 422 and "too weak" in weak.text and 'value="123"' not in weak.text
    r = await console.post("/signup", data={**data, "password": STRONG_PASSWORD})
    assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
    assert re.search(r'<code id="new-api-key">fdk_', r.text)
    assert await db.fetchval("SELECT role FROM admins WHERE email = $1", f"{slug}@example.com") == "owner"
    assert (await login(console, f"{slug}@example.com", STRONG_PASSWORD)).status_code == 303
    console.cookies.clear()
