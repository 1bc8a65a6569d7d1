"""Pages about one's own account: sign up, accept an invitation, change the password.

Sign-up and accepting an invitation happen before anyone is signed in (``public`` to the
role guard; CSRF still applies). Changing the password needs the current one, ends every
browser session of the admin and starts a new one, so the cookie rotates.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound, RateLimited
from frontdoor_httpkit import client_address, current_request_id
from frontdoor_tenancy import admins, team, tenants
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from ..access import COOKIE, PUBLIC, opt
from .deps import ctx_of, rate_limit
from .page import FORM, Console

__all__ = ["dashboard_routes", "public_routes"]


def _cookie(value: str, *, secure: bool) -> Cookie:
    return Cookie(key=COOKIE, value=value, path="/", httponly=True, secure=secure, samesite="lax")


class SignUpForm(msgspec.Struct, frozen=True, kw_only=True):
    email: str = ""
    password: str = ""
    organization_name: str = ""
    slug: str = ""


def _signup_page(form: SignUpForm | None = None, *, error: str | None = None, errors: dict[str, str] | None = None,
                 status_code: int = 200) -> Template:
    return Template("signup.html", status_code=status_code, headers={"Cache-Control": "no-store"},
                    context={"form": form or SignUpForm(), "error": error, "errors": errors or {}})


@get("/signup", include_in_schema=False)
async def signup_page() -> Template:
    return _signup_page()


@post("/signup", include_in_schema=False, opt=opt(PUBLIC))
async def signup_submit(data: Annotated[SignUpForm, FORM], request: Request[Any, Any, Any],
                        state: State) -> Template:
    ctx = ctx_of(state)
    shown = msgspec.structs.replace(data, password="")
    try:
        await rate_limit(ctx, f"signup:{client_address(request, ctx.settings.trusted_proxies)}",
                         limit=ctx.settings.signup_rate_limit, window_s=3600)
        result = await tenants.sign_up(
            ctx.pool, tenants.SignUp(email=data.email, password=data.password,
                                     organization_name=data.organization_name, slug=data.slug),
            kek=ctx.kek, now=ctx.now(), session_lifetime_s=int(ctx.settings.session_lifetime.total_seconds()),
            request_id=current_request_id())
    except RateLimited:
        return _signup_page(shown, error="Too many sign-ups from here. Try again later.", status_code=429)
    except (Invalid, Conflict) as exc:
        return _signup_page(shown, error=exc.detail, errors=exc.fields, status_code=422)
    # The only response that ever shows this key.
    return Template("signup_done.html", status_code=201, headers={"Cache-Control": "no-store"},
                    context={"tenant": result.tenant, "email": data.email.strip(), "api_key": result.api_key.api_key,
                             "issuer": ctx.issuer_url(result.tenant.slug)})


class AcceptForm(msgspec.Struct, frozen=True, kw_only=True):
    password: str = ""


async def _invite_page(state: State, token: str, *, error: str | None = None, status_code: int = 200) -> Template:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        found = await team.find_invite(conn, token, now=ctx.now())
        org = (await tenants.get_tenant(conn, found[1])).organization_name if found else None
    if found is None:
        return Template("invite.html", status_code=404, headers={"Cache-Control": "no-store"},
                        context={"invite": None, "org": None, "error": None})
    return Template("invite.html", status_code=status_code, headers={"Cache-Control": "no-store"},
                    context={"invite": found[0], "org": org, "error": error})


@get("/invite/{token:str}", include_in_schema=False)
async def invite_page(token: FromPath[str], state: State) -> Template:
    return await _invite_page(state, token[:100])


@post("/invite/{token:str}", include_in_schema=False, opt=opt(PUBLIC))
async def invite_accept(token: FromPath[str], data: Annotated[AcceptForm, FORM], request: Request[Any, Any, Any],
                        state: State) -> Response[Any]:
    ctx = ctx_of(state)
    token = token[:100]
    try:
        await rate_limit(ctx, f"invite:ip:{client_address(request, ctx.settings.trusted_proxies)}",
                         limit=ctx.settings.login_network_rate_limit, window_s=900)
        async with transaction(ctx.pool) as conn:
            admin = await team.accept_invite(conn, token, data.password, now=ctx.now(),
                                             request_id=current_request_id())
            cookie, _ = await admins.start_session(conn, admin, now=ctx.now(), request_id=current_request_id())
    except NotFound:
        return await _invite_page(state, token)
    except (Invalid, Conflict, RateLimited) as exc:
        return await _invite_page(state, token, error=exc.detail, status_code=422)
    return Redirect("/", status_code=303, cookies=[_cookie(cookie, secure=not ctx.settings.is_dev)])


class PasswordForm(msgspec.Struct, frozen=True, kw_only=True):
    current_password: str = ""
    new_password: str = ""


@get("/account/password")
async def password_page(console: Console, notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return console.page("password.html", nav="password", error=None,
                        notice="Password changed. Your other browser sessions have been signed out."
                        if notice == "changed" else None)


# Any member changes their own password: the guard checks only that they are signed in.
@post("/account/password", opt=opt("read"))
async def password_change(data: Annotated[PasswordForm, FORM], console: Console, request: Request[Any, Any, Any],
                          state: State) -> Response[Any]:
    ctx = ctx_of(state)
    try:
        await rate_limit(ctx, f"password:{console.actor.id}", limit=ctx.settings.login_rate_limit, window_s=900)
        async with transaction(ctx.pool) as conn:
            await admins.change_password(conn, console.session.admin, data.current_password, data.new_password,
                                         now=ctx.now(), request_id=current_request_id())
            cookie, _ = await admins.start_session(conn, console.session.admin, now=ctx.now(),
                                                   request_id=current_request_id())
    except (Invalid, RateLimited) as exc:
        return console.page("password.html", nav="password", error=exc.detail, notice=None, status_code=422)
    return Redirect("/account/password?notice=changed", status_code=303,
                    cookies=[_cookie(cookie, secure=not ctx.settings.is_dev)])


public_routes: list[Any] = [signup_page, signup_submit, invite_page, invite_accept]
dashboard_routes: list[Any] = [password_page, password_change]
