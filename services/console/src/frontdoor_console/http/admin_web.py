"""Admin sign-in for the browser: a session cookie, CSRF on every form.

The cookie is ``HttpOnly; SameSite=Lax`` and ``Secure`` outside dev mode; it carries an
opaque token whose hash is stored, and it is replaced at every sign-in. Unknown email
and wrong password get the same answer; attempts are rate-limited per email (its
normalised form, `email_key`) and per client network (an IPv6 /64, an IPv4 address).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import RateLimited
from frontdoor_httpkit import client_address, current_request_id
from frontdoor_tenancy import admins
from frontdoor_tenancy.email_address import email_key
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from ..access import COOKIE, PUBLIC, authenticate_cookie
from ..access import opt as access_opt
from .deps import ctx_of, rate_limit

__all__ = ["COOKIE", "routes"]



class LoginForm(msgspec.Struct, frozen=True, kw_only=True):
    email: str = ""
    password: str = ""


def _cookie(value: str, *, secure: bool, max_age: int | None) -> Cookie:
    return Cookie(key=COOKIE, value=value, path="/", httponly=True, secure=secure, samesite="lax", max_age=max_age)


async def current_admin(request: Request[Any, Any, Any], state: State) -> admins.AdminSession | None:
    """The signed-in admin of this browser, if any."""
    return await authenticate_cookie(request)


@get("/login", include_in_schema=False)
async def login_page() -> Template:
    return Template("login.html", context={"error": None, "email": ""})


@post("/login", include_in_schema=False, opt=access_opt(PUBLIC))
async def login(
    data: Annotated[LoginForm, Body(media_type=RequestEncodingType.URL_ENCODED)],
    request: Request[Any, Any, Any],
    state: State,
) -> Response[Any]:
    ctx = ctx_of(state)
    failed = Template("login.html", context={"error": "Email or password is incorrect.", "email": data.email},
                      status_code=401)
    client = client_address(request, ctx.settings.trusted_proxies)
    try:
        await rate_limit(ctx, f"login:ip:{client}", limit=ctx.settings.login_network_rate_limit, window_s=900)
        # One bucket per address however it is spelt (case, spaces, trailing dots, fullwidth, IDNA).
        await rate_limit(ctx, f"login:email:{email_key(data.email)}", limit=ctx.settings.login_rate_limit,
                         window_s=900)
    except RateLimited as exc:
        return Template("login.html", context={"error": "Too many attempts. Wait a few minutes and try again.",
                                               "email": data.email}, status_code=429,
                        headers={"Retry-After": str(exc.retry_after)})
    async with ctx.pool.acquire() as conn:
        admin = await admins.authenticate(conn, data.email, data.password)
    if admin is None:
        return failed
    old = request.cookies.get(COOKIE)
    async with transaction(ctx.pool) as conn:
        if old:
            await admins.end_session(conn, old)
        token, _ = await admins.start_session(conn, admin, now=ctx.now(), request_id=current_request_id())
    secure = not ctx.settings.is_dev
    return Redirect("/", status_code=303, cookies=[_cookie(token, secure=secure, max_age=None)])


@post("/logout", include_in_schema=False, opt=access_opt(PUBLIC))
async def logout(request: Request[Any, Any, Any], state: State) -> Response[Any]:
    token = request.cookies.get(COOKIE)
    if token:
        async with transaction(ctx_of(state).pool) as conn:
            await admins.end_session(conn, token)
    return Redirect("/login", status_code=303,
                    cookies=[_cookie("", secure=not ctx_of(state).settings.is_dev, max_age=0)])


routes: list[Any] = [login_page, login, logout]
"""``/`` (home) is the dashboard's overview: see ``dashboard.py``."""
