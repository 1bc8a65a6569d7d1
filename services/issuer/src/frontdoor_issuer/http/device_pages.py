"""The user's side of Device Sign-In (PAP §4.6, RFC 8628 §3.3) and the login handoff.

``GET {issuer}/device`` asks for the code (prefilled from ``verification_uri_complete``);
submitting it approves nothing: it sends the browser to the company's login page with a
signed request (ADR 0002). The company sends the browser back to
``{issuer}/login/callback`` with a signed response naming the account; then the consent
page lists what the agent asked for, and the user allows all or part of it, or denies.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from frontdoor_core.errors import RateLimited, Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_tenancy.login_handoff import LoginHandoffFailed, finish_login, start_login
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.params import FromPath
from litestar.response import Redirect, Template

from ..flows import FlowState, FlowStore
from .discovery import not_found

__all__ = ["routes"]

FLOW_COOKIE = "fd_flow"
_PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _page(template: str, tenant: Any, state: State, status: int = 200, **context: Any) -> Template:
    context.setdefault("company", tenant.settings.organization_name or "the company")
    context["static_base"] = f"{state.ctx.settings.issuer_base_url}/_static"
    return Template(template, context=context, status_code=status, headers=_PAGE_HEADERS)


def _message(tenant: Any, state: State, heading: str, message: str, status: int = 200) -> Template:
    return _page("message.html", tenant, state, status, heading=heading, message=message)


def _flow_cookie(state: State, slug: str, value: str, *, max_age: int | None = 600) -> Cookie:
    # The company's login page answers with a cross-site form POST to the callback, which a
    # SameSite=Lax cookie would not accompany: over HTTPS the flow cookie is SameSite=None
    # (and Secure); in dev, issuer and company share 127.0.0.1, one site, and Lax works.
    dev = state.ctx.settings.is_dev
    return Cookie(key=FLOW_COOKIE, value=value, path=f"/{slug}/", httponly=True,
                  samesite="lax" if dev else "none", secure=not dev, max_age=max_age)


@get("/{slug:str}/device", include_in_schema=False)
async def device_page(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    tenant = await state.ctx.tenant(slug)
    if tenant is None:
        return not_found()
    code = request.query_params.get("user_code", "")[:20]
    return _page("device_enter.html", tenant, state, action=f"{tenant.issuer}/device", user_code=code, error=None)


@post("/{slug:str}/device", include_in_schema=False)
async def device_submit(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    form = await request.form()
    raw = str(form.get("user_code", ""))[:40]
    client = request.client.host if request.client else "unknown"
    try:
        allowed, retry = await hit(ctx.redis, f"device-code:{tenant.tenant_id}:{client}", limit=20, window_s=300)
    except Exception:
        raise Unavailable("rate_limiter_unavailable", "Temporarily unavailable.") from None
    if not allowed:
        raise RateLimited("rate_limited", "Too many codes tried; wait a few minutes.", retry_after=retry)
    pending = await ctx.devices.find_by_user_code(tenant.tenant_id, raw, requester=client)
    if pending is None or pending.expired or pending.status != "pending":
        return _page("device_enter.html", tenant, state, 400, action=f"{tenant.issuer}/device", user_code=raw,
                     error="That code is not valid or has expired. Check it on your assistant's screen.")
    try:
        agent = await ctx.directory.get_client(pending.client_id)
        agent_name = agent.metadata.client_name
    except Exception:
        agent_name = urlsplit(pending.client_id).hostname or "An assistant"
    flows = FlowStore(ctx.redis)
    flow = FlowState(tenant_id=tenant.tenant_id, kind="device", client_id=pending.client_id, agent_name=agent_name,
                     requested_scope=list(pending.scope), user_code=pending.user_code)
    flow_id = await flows.create(flow)
    try:
        async with ctx.pool.acquire() as conn:
            login_url = await start_login(conn, ctx.kek, tenant.tenant_id, issuer=tenant.issuer,
                                          return_to=f"{tenant.issuer}/login/callback", agent_name=agent_name,
                                          scopes=list(pending.scope), now=ctx.now(), redis=ctx.redis)
    except LoginHandoffFailed:
        return _message(tenant, state, "Sign-in is not available",
                        "This company has not connected its sign-in page to Frontdoor yet.", 503)
    flow.login_jti = login_url.request_jti
    await flows.save(flow_id, flow)
    return Redirect(str(login_url), status_code=303, cookies=[_flow_cookie(state, slug, flow_id)],
                    headers=_PAGE_HEADERS)


@post("/{slug:str}/login/callback", include_in_schema=False)
async def login_callback(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    """The company's signed answer, posted by the user's browser.

    The flow is the one this browser started (its cookie); the answer must name that
    flow's login request, be signed by the company and be fresh and unused.
    """
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    form = await request.form()
    response_jwt = str(form.get("response", ""))[:8192]
    flow_id = request.cookies.get(FLOW_COOKIE)
    flows = FlowStore(ctx.redis)
    flow = await flows.get(flow_id)
    if flow is None or flow_id is None or flow.tenant_id != tenant.tenant_id or flow.login_jti is None:
        return _message(tenant, state, "This sign-in has expired", "Start again from your assistant.", 400)
    try:
        async with ctx.pool.acquire() as conn:
            account = await finish_login(conn, tenant.tenant_id, issuer=tenant.issuer, response_jwt=response_jwt,
                                         expected_request_jti=flow.login_jti, now=ctx.now(), redis=ctx.redis,
                                         fetcher=ctx.fetcher)
    except Unavailable:
        raise
    except Exception:
        return _message(tenant, state, "We could not confirm your sign-in",
                        "Start again from your assistant.", 400)
    flow.account_id = account
    await flows.save(flow_id, flow)
    return Redirect(f"{tenant.issuer}/consent", status_code=303, cookies=[_flow_cookie(state, slug, flow_id)],
                    headers=_PAGE_HEADERS)


@get("/{slug:str}/consent", include_in_schema=False)
async def consent_page(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    flow = await FlowStore(ctx.redis).get(request.cookies.get(FLOW_COOKIE))
    if flow is None or flow.tenant_id != tenant.tenant_id or flow.account_id is None:
        return _message(tenant, state, "Nothing to approve", "Start again from your assistant.", 400)
    described = tenant.settings.all_scopes()
    scopes = [{"name": s, "description": described.get(s, s)} for s in flow.requested_scope]
    return _page("consent.html", tenant, state, action=f"{tenant.issuer}/consent", agent_name=flow.agent_name,
                 agent_host=urlsplit(flow.client_id).hostname, account=flow.account_id, scopes=scopes,
                 user_code=flow.user_code)


@post("/{slug:str}/consent", include_in_schema=False)
async def consent_submit(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    flows = FlowStore(ctx.redis)
    flow_id = request.cookies.get(FLOW_COOKIE)
    flow = await flows.get(flow_id)
    if flow is None or flow_id is None or flow.tenant_id != tenant.tenant_id or flow.account_id is None:
        return _message(tenant, state, "Nothing to approve", "Start again from your assistant.", 400)
    form = await request.form()
    decision = str(form.get("decision", ""))
    chosen = {str(v) for v in form.getall("scope", [])}
    granted = [s for s in flow.requested_scope if s in chosen]  # never more than asked
    await flows.end(flow_id)
    done_cookie = _flow_cookie(state, slug, "", max_age=0)
    if decision != "allow" or not granted:
        if flow.user_code:
            await ctx.devices.deny(tenant.tenant_id, flow.user_code)
        page = _message(tenant, state, "Access denied", f"{flow.agent_name} was not given access. You can close this page.")
        page.cookies.append(done_cookie)
        return page
    if flow.user_code:
        ok = await ctx.devices.approve(tenant.tenant_id, flow.user_code, flow.account_id, granted)
        if not ok:
            page = _message(tenant, state, "This code has expired", "Start again from your assistant.", 400)
            page.cookies.append(done_cookie)
            return page
    page = _message(tenant, state, "You're connected",
                    f"{flow.agent_name} can now act for you within what you allowed. Go back to your assistant.")
    page.cookies.append(done_cookie)
    return page


routes: list[Any] = [device_page, device_submit, login_callback, consent_page, consent_submit]
