"""The user's side of Device Sign-In (PAP §4.6, RFC 8628 §3.3).

``GET {issuer}/device`` asks for the code (prefilled from ``verification_uri_complete``);
submitting it approves nothing: it sends the browser to the company's login page with a
signed request (ADR 0002), or to the company's OpenID Provider, then through the callback and the consent page shared with
Direct Sign-In (`sign_in_pages`), whose decision approves or denies the user code.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from frontdoor_core.errors import RateLimited, Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_httpkit import client_address
from frontdoor_sessions import device_attempt_id
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath

from ..flows import FlowState
from .discovery import not_found
from .sign_in_pages import login_targets, message, page, start_handoff

__all__ = ["routes"]

_SUBMISSIONS_PER_NETWORK_PER_MINUTE = 60


@get("/{slug:str}/device", include_in_schema=False)
async def device_page(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    tenant = await state.ctx.tenant(slug)
    if tenant is None:
        return not_found()
    code = request.query_params.get("user_code", "")[:20]
    # Continue is answered by a redirect to the company's login page (another origin).
    return page("device_enter.html", tenant, state, form_targets=await login_targets(state, tenant),
                action=f"{tenant.issuer}/device", user_code=code, error=None)


@post("/{slug:str}/device", include_in_schema=False)
async def device_submit(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    form = await request.form()
    raw = str(form.get("user_code", ""))[:40]
    client = client_address(request, state.ctx.settings.trusted_proxies)
    # A flood limit on submissions per network; guessing is limited by the wrong codes
    # counted per requester and per tenant (`DeviceStore.find_by_user_code`).
    try:
        allowed, retry = await hit(ctx.redis, f"device-code:{tenant.tenant_id}:{client}",
                                   limit=_SUBMISSIONS_PER_NETWORK_PER_MINUTE, window_s=60)
    except Exception:
        raise Unavailable("rate_limiter_unavailable", "Temporarily unavailable.") from None
    try:
        if not allowed:
            raise RateLimited("rate_limited", "Too many codes tried.", retry_after=retry)
        pending = await ctx.devices.find_by_user_code(tenant.tenant_id, raw, requester=client)
    except RateLimited as exc:
        busy = message(tenant, state, "Too many codes tried", "Wait a minute, then enter the code again.", 429)
        busy.headers["Retry-After"] = str(exc.retry_after or 60)
        return busy
    if pending is None or pending.expired or pending.status != "pending":
        return page("device_enter.html", tenant, state, 400, form_targets=await login_targets(state, tenant),
                    action=f"{tenant.issuer}/device", user_code=raw,
                    error="That code is not valid or has expired. Check it on your assistant's screen.")
    try:
        agent = await ctx.directory.get_client(pending.client_id)
        agent_name = agent.metadata.client_name
    except Exception:
        agent_name = urlsplit(pending.client_id).hostname or "An assistant"
    flow = FlowState(tenant_id=tenant.tenant_id, kind="device", client_id=pending.client_id, agent_name=agent_name,
                     requested_scope=list(pending.scope), user_code=pending.user_code,
                     attempt_id=device_attempt_id(pending.handle))
    handoff = await start_handoff(state, tenant, slug, flow)
    if handoff is None:
        return message(tenant, state, "Sign-in is not available",
                       "This company has not connected its sign-in page to Frontdoor yet.", 503)
    return handoff


routes: list[Any] = [device_page, device_submit]
