"""The pages every browser sign-in shares: the login handoff, the callback and consent.

A sign-in that needs the user (Device, PAP §4.6, from ``{issuer}/device``; Direct, PAP §4.5,
from ``{issuer}/oauth/authorize``) creates a *flow* (`FlowStore`) and calls
:func:`start_handoff`: the browser goes to the company's login page with a signed request
(ADR 0002) and carries the flow's ID in a cookie. The company sends it back to
``{issuer}/login/callback`` with a signed response naming the account; then the consent
page lists what the agent asked for, and the user allows all or part of it, or denies.

When the tenant's login connection is ``oidc``, the company's identity provider replaces
the handoff: :func:`start_handoff` sends the browser to the IdP's authorization endpoint
(`frontdoor_sessions.oidc_login`), and the IdP answers at ``{issuer}/oidc/callback``
(`oidc_pages`); consent stays on Frontdoor's page.

What the decision does depends on the flow's kind: a Device flow approves or denies the
user code (the agent's next poll learns it); a Direct flow redirects the browser to the
agent's ``redirect_uri`` with a one-use ``code`` or ``error=access_denied``, always with
``state`` and ``iss`` (RFC 9207).

Each step is recorded on the flow's sign-in attempt (`reached`, `decided`;
`frontdoor_sessions.sign_in_attempts`) for the agent funnel: the login page, consent, the decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from frontdoor_core.errors import Unavailable
from frontdoor_httpkit import content_security_policy, origin_source
from frontdoor_sessions import (
    AttemptStage,
    AuthorizationCodeStore,
    IssuedCode,
    TenantIssuer,
    record_decision,
    record_stage,
)
from frontdoor_sessions.oidc_login import start_oidc_login
from frontdoor_sessions.oidc_provider import ProviderUnavailable, discover
from frontdoor_tenancy.login_handoff import LoginHandoffFailed, finish_login, start_login
from litestar import Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.params import FromPath
from litestar.response import Redirect, Template

from ..flows import FLOW_TTL_S, FlowState, FlowStore
from .discovery import not_found

__all__ = [
    "FLOW_COOKIE",
    "PAGE_HEADERS",
    "authorization_redirect",
    "flow_cookie",
    "login_targets",
    "oidc_redirect_uri",
    "message",
    "page",
    "reached",
    "decided",
    "routes",
    "start_handoff",
]

FLOW_COOKIE = "fd_flow"
PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def page(template: str, tenant: Any, state: State, status: int = 200, *, form_targets: Sequence[str] = (),
         **context: Any) -> Template:
    """A Frontdoor page of ``tenant`` (never cached, no referrer, framing denied).

    Its form posts to the issuer, which may answer with a redirect to another origin:
    ``form_targets`` are the URLs it may redirect to, whose origins (and only those) the
    page's ``form-action`` allows beside ``'self'``, since browsers check the redirects
    that follow a form's POST against the policy of the page that sent it.
    """
    context.setdefault("company", tenant.settings.organization_name or "the company")
    context["static_base"] = f"{state.ctx.settings.issuer_base_url}/_static"
    sources = [s for s in map(origin_source, form_targets) if s is not None]
    headers = {**PAGE_HEADERS, "Content-Security-Policy": content_security_policy(form_action=sources)}
    return Template(template, context=context, status_code=status, headers=headers)


async def login_targets(state: State, tenant: TenantIssuer) -> list[str]:
    """Where a form that starts the sign-in ends: the company's login page, or, for an
    ``oidc`` connection, the IdP's authorization endpoint (from its cached metadata)."""
    login = tenant.settings.login
    if login is None:
        return []
    if login.type != "oidc":
        return [login.url]
    assert login.issuer is not None  # validate_settings
    try:
        meta = await discover(login.issuer, tenant_id=tenant.tenant_id, fetcher=state.ctx.fetcher,
                              redis=state.ctx.redis)
    except ProviderUnavailable:
        return []  # the submission then answers "not available" itself, without leaving
    return [meta.authorization_endpoint]


def oidc_redirect_uri(tenant: TenantIssuer) -> str:
    """The redirect URI the company registers at its IdP for Frontdoor: ``{issuer}/oidc/callback``."""
    return f"{tenant.issuer}/oidc/callback"


def message(tenant: Any, state: State, heading: str, text: str, status: int = 200) -> Template:
    """A page that only says something."""
    return page("message.html", tenant, state, status, heading=heading, message=text)


def flow_cookie(state: State, slug: str, value: str, *, max_age: int | None = 600) -> Cookie:
    """The browser's place in its flow.

    The company's login page answers with a cross-site form POST to the callback, which a
    SameSite=Lax cookie would not accompany: whenever the issuer is served over HTTPS the
    flow cookie is SameSite=None (and Secure), dev included (a dev stack behind TLS names of
    its own puts issuer and company on different sites); only a dev issuer on plain HTTP
    (``make run``'s 127.0.0.1, the company on the same site) uses Lax, since a browser drops
    SameSite=None without Secure.
    """
    settings = state.ctx.settings
    cross_site = not settings.is_dev or settings.issuer_base_url.startswith("https://")
    return Cookie(key=FLOW_COOKIE, value=value, path=f"/{slug}/", httponly=True,
                  samesite="none" if cross_site else "lax", secure=cross_site, max_age=max_age)


def authorization_redirect(redirect_uri: str, issuer: str, **params: str | None) -> Redirect:
    """Send the browser to the agent's ``redirect_uri`` with ``params`` and ``iss`` (RFC 9207).

    The ``redirect_uri``'s own query is kept (RFC 6749 §3.1.2); empty values are left out.
    """
    parts = urlsplit(redirect_uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query.extend((k, v) for k, v in params.items() if v)
    query.append(("iss", issuer))
    location = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
    return Redirect(location, status_code=303, headers=PAGE_HEADERS)


async def reached(state: State, tenant: TenantIssuer, flow: FlowState, stage: AttemptStage) -> None:
    """The flow's sign-in attempt reached ``stage`` (the agent funnel); a Direct flow's
    lifetime restarts with each step (`FlowStore.save`), a Device code's does not. At
    consent, the account the login vouched for tells whether it is a step-up."""
    if flow.attempt_id is None:
        return
    now = state.ctx.now()
    extend = now + timedelta(seconds=FLOW_TTL_S) if flow.kind == "direct" else None
    async with state.ctx.pool.acquire() as conn:
        await record_stage(conn, tenant.tenant_id, flow.attempt_id, stage, now=now, expires_at=extend,
                           account_id=flow.account_id if stage == "consent" else None)


async def decided(state: State, tenant: TenantIssuer, flow: FlowState, *, allowed: bool) -> None:
    """The user allowed or denied the flow's sign-in attempt (the agent funnel)."""
    if flow.attempt_id is None:
        return
    async with state.ctx.pool.acquire() as conn:
        await record_decision(conn, tenant.tenant_id, flow.attempt_id, allowed=allowed, now=state.ctx.now())


async def start_handoff(state: State, tenant: TenantIssuer, slug: str, flow: FlowState) -> Response[Any] | None:
    """Create ``flow`` and send the browser to the company's login page (or its IdP); None
    when the tenant has no working login connection (the caller says so its own way)."""
    ctx = state.ctx
    flows = FlowStore(ctx.redis)
    flow_id = await flows.create(flow)
    login = tenant.settings.login
    if login is not None and login.type == "oidc":
        try:
            url = await start_oidc_login(login, tenant_id=tenant.tenant_id, flow_id=flow_id,
                                         redirect_uri=oidc_redirect_uri(tenant), fetcher=ctx.fetcher, redis=ctx.redis)
        except ProviderUnavailable:
            await flows.end(flow_id)
            return None
        await reached(state, tenant, flow, "login")
        return Redirect(url, status_code=303, cookies=[flow_cookie(state, slug, flow_id)], headers=PAGE_HEADERS)
    try:
        async with ctx.pool.acquire() as conn:
            login_url = await start_login(conn, ctx.kek, tenant.tenant_id, issuer=tenant.issuer,
                                          return_to=f"{tenant.issuer}/login/callback", agent_name=flow.agent_name,
                                          scopes=list(flow.requested_scope), now=ctx.now(), redis=ctx.redis)
    except LoginHandoffFailed:
        await flows.end(flow_id)
        return None
    flow.login_jti = login_url.request_jti
    await flows.save(flow_id, flow)
    await reached(state, tenant, flow, "login")
    return Redirect(str(login_url), status_code=303, cookies=[flow_cookie(state, slug, flow_id)],
                    headers=PAGE_HEADERS)


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
        return message(tenant, state, "This sign-in has expired", "Start again from your assistant.", 400)
    try:
        async with ctx.pool.acquire() as conn:
            account = await finish_login(conn, tenant.tenant_id, issuer=tenant.issuer, response_jwt=response_jwt,
                                         expected_request_jti=flow.login_jti, now=ctx.now(), redis=ctx.redis,
                                         fetcher=ctx.fetcher)
    except Unavailable:
        raise
    except Exception:
        return message(tenant, state, "We could not confirm your sign-in", "Start again from your assistant.", 400)
    flow.account_id, flow.idp_session, flow.login_via = account, None, "handoff"
    await flows.save(flow_id, flow)
    await reached(state, tenant, flow, "consent")
    return Redirect(f"{tenant.issuer}/consent", status_code=303, cookies=[flow_cookie(state, slug, flow_id)],
                    headers=PAGE_HEADERS)


@get("/{slug:str}/consent", include_in_schema=False)
async def consent_page(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    flow = await FlowStore(ctx.redis).get(request.cookies.get(FLOW_COOKIE))
    if flow is None or flow.tenant_id != tenant.tenant_id or flow.account_id is None:
        return message(tenant, state, "Nothing to approve", "Start again from your assistant.", 400)
    described = tenant.settings.all_scopes()
    scopes = [{"name": s, "description": described.get(s, s)} for s in flow.requested_scope]
    # Direct Sign-In: Allow and Deny are answered by a redirect to the agent's redirect_uri
    # (checked exactly at authorize, PAP-4.5-01); a Device flow's answer is a page of ours.
    redirect_uri = str((flow.authorize_request or {}).get("redirect_uri", "")) if flow.kind == "direct" else ""
    return page("consent.html", tenant, state, form_targets=[redirect_uri] if redirect_uri else [],
                action=f"{tenant.issuer}/consent", agent_name=flow.agent_name,
                agent_host=urlsplit(flow.client_id).hostname, account=flow.account_id, scopes=scopes,
                user_code=flow.user_code)


@post("/{slug:str}/consent", include_in_schema=False)
async def consent_submit(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    """The user's decision (CSRF-checked by the app): allow all or part of the request, or deny."""
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    flows = FlowStore(ctx.redis)
    flow_id = request.cookies.get(FLOW_COOKIE)
    flow = await flows.get(flow_id)
    if flow is None or flow_id is None or flow.tenant_id != tenant.tenant_id or flow.account_id is None:
        return message(tenant, state, "Nothing to approve", "Start again from your assistant.", 400)
    form = await request.form()
    decision = str(form.get("decision", ""))
    chosen = {str(v) for v in form.getall("scope", [])}
    granted = [s for s in flow.requested_scope if s in chosen]  # never more than asked
    allowed = decision == "allow" and bool(granted)
    await flows.end(flow_id)
    await decided(state, tenant, flow, allowed=allowed)
    if flow.kind == "direct":
        response = await _direct_decision(state, tenant, flow, granted if allowed else None)
    else:
        response = await _device_decision(state, tenant, flow, granted if allowed else None)
    response.cookies.append(flow_cookie(state, slug, "", max_age=0))
    return response


async def _device_decision(state: State, tenant: TenantIssuer, flow: FlowState,
                           granted: list[str] | None) -> Response[Any]:
    devices = state.ctx.devices
    if granted is None:
        if flow.user_code:
            await devices.deny(tenant.tenant_id, flow.user_code)
        return message(tenant, state, "Access denied", f"{flow.agent_name} was not given access. You can close this page.")
    if flow.user_code and not await devices.approve(tenant.tenant_id, flow.user_code, flow.account_id, granted,
                                                    idp_session=flow.idp_session, login_via=flow.login_via):
        return message(tenant, state, "This code has expired", "Start again from your assistant.", 400)
    return message(tenant, state, "You're connected",
                   f"{flow.agent_name} can now act for you within what you allowed. Go back to your assistant.")


async def _direct_decision(state: State, tenant: TenantIssuer, flow: FlowState,
                           granted: list[str] | None) -> Response[Any]:
    request = flow.authorize_request or {}
    redirect_uri, agent_state = str(request.get("redirect_uri", "")), str(request.get("state", ""))
    if not redirect_uri:
        return message(tenant, state, "This sign-in has expired", "Start again from your assistant.", 400)
    if granted is None:
        return authorization_redirect(redirect_uri, tenant.issuer, error="access_denied",
                                      error_description="The user did not allow access.", state=agent_state)
    codes: AuthorizationCodeStore = state.authorization_codes
    code = await codes.issue(tenant.tenant_id, IssuedCode(
        client_id=flow.client_id, redirect_uri=redirect_uri, code_challenge=str(request.get("code_challenge", "")),
        requested_scope=" ".join(flow.requested_scope), scope=" ".join(granted), account_id=flow.account_id or "",
        profile="1.0" if request.get("profile") == "1.0" else "0.2", idp_session=flow.idp_session or "",
        login_via=flow.login_via or ""),
        now=state.ctx.now())
    return authorization_redirect(redirect_uri, tenant.issuer, code=code, state=agent_state)


routes: list[Any] = [login_callback, consent_page, consent_submit]
