"""Admin browser sign-in: cookie flags, CSRF, one answer for unknown email and wrong password."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import AsyncTestClient

from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.support.fixed_windows import room_in_window


async def csrf_token(client: AsyncTestClient[Any]) -> str:
    r = await client.get("/login")
    assert r.status_code == 200
    m = re.search(r'name="_csrf_token" value="([^"]+)"', r.text)
    assert m
    return m.group(1)


async def login(client: AsyncTestClient[Any], email: str, password: str) -> Any:
    token = await csrf_token(client)
    return await client.post("/login", data={"email": email, "password": password, "_csrf_token": token},
                             follow_redirects=False)


async def test_login_sets_a_safe_cookie_and_logout_ends_it(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                           db: Any) -> None:
    console.cookies.clear()
    r = await login(console, tenant.email, STRONG_PASSWORD)
    assert r.status_code == 303
    set_cookie = next(v for k, v in r.headers.multi_items() if k == "set-cookie" and v.startswith("fd_session="))
    assert "HttpOnly" in set_cookie
    assert "SameSite=lax" in set_cookie or "SameSite=Lax" in set_cookie
    assert "Path=/" in set_cookie
    token = set_cookie.split(";")[0].split("=", 1)[1]
    stored = await db.fetchval("SELECT count(*) FROM admin_sessions WHERE tenant_id = $1", tenant.id)
    assert stored == 1
    raw = await db.fetchval("SELECT count(*) FROM admin_sessions WHERE token_hash::text LIKE $1", f"%{token}%")
    assert raw == 0
    home = await console.get("/", follow_redirects=False)
    assert home.status_code == 200
    assert tenant.email in home.text
    assert home.headers["content-security-policy"].find("frame-ancestors 'none'") >= 0
    csrf = re.search(r'name="_csrf_token" value="([^"]+)"', home.text).group(1)  # type: ignore[union-attr]
    r = await console.post("/logout", data={"_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert await db.fetchval("SELECT count(*) FROM admin_sessions WHERE tenant_id = $1", tenant.id) == 0
    console.cookies.set("fd_session", token)
    assert (await console.get("/", follow_redirects=False)).status_code == 303
    console.cookies.clear()


async def test_unknown_email_and_wrong_password_look_the_same(console: AsyncTestClient[Any],
                                                              tenant: TenantHandle) -> None:
    console.cookies.clear()
    wrong = await login(console, tenant.email, "not the password at all")
    unknown = await login(console, "nobody-" + tenant.email, "not the password at all")
    assert wrong.status_code == unknown.status_code == 401
    msg = "Email or password is incorrect."
    assert msg in wrong.text and msg in unknown.text
    assert "fd_session" not in wrong.headers.get("set-cookie", "")
    console.cookies.clear()


async def test_login_form_requires_csrf(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    console.cookies.clear()
    r = await console.post("/login", data={"email": tenant.email, "password": STRONG_PASSWORD},
                           follow_redirects=False)
    assert r.status_code == 403
    console.cookies.clear()


async def test_login_is_rate_limited_per_email(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    console.cookies.clear()
    await room_in_window(900, needed_s=20)  # the 12 attempts fall in one 15-minute window of the login limit
    statuses = [(await login(console, tenant.email, "wrong password " + str(i))).status_code for i in range(11)]
    assert statuses[:10] == [401] * 10
    assert statuses[10] == 429
    # even the right password is refused while the window lasts
    assert (await login(console, tenant.email, STRONG_PASSWORD)).status_code == 429
    console.cookies.clear()
