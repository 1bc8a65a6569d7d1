"""``GET {issuer}/oidc/callback``: the company's OpenID Provider sends the browser back here.

The redirect URI the company registers for Frontdoor at its IdP. The answer must belong
to this browser's sign-in flow (its cookie, and the one-use ``state`` bound to it), come
from the IdP (RFC 9207 ``iss``), and redeem into a valid ID token
(`frontdoor_sessions.oidc_login`); the account it names then goes on to Frontdoor's
consent page, as with the signed handoff.

An IdP error (the user cancelled, or the IdP refused) is the protocol's own refusal to the
agent: a Device flow's user code is denied (the agent's next poll gets ``access_denied``,
PAP §4.6, RFC 8628 §3.5) and the user sees a page saying so; a Direct flow redirects to the
agent's ``redirect_uri`` with ``error=access_denied``, ``state`` and ``iss`` (PAP §4.5,
RFC 6749 §4.1.2.1). An answer that fails a check is only shown, never forwarded.

An answer to the dashboard's test sign-in (its pending ``state`` marked as a test,
`is_test_state`) is not a sign-in: it goes on, unchanged, to the console's
``/settings/login/test-result``, which finishes it bound to the admin's console session
and signs nobody in. The company so registers one redirect URI only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import structlog
from frontdoor_core.errors import Unavailable
from frontdoor_sessions.oidc_login import (
    OidcFailure,
    OidcLoginDenied,
    OidcLoginFailed,
    finish_oidc_login,
    is_test_state,
)
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.response import Redirect

from ..flows import FlowState, FlowStore
from .discovery import not_found
from .sign_in_pages import (
    FLOW_COOKIE,
    PAGE_HEADERS,
    authorization_redirect,
    decided,
    flow_cookie,
    message,
    oidc_redirect_uri,
    reached,
)

__all__ = ["routes"]

_log = structlog.get_logger("frontdoor.issuer.oidc")
_PARAMETERS = ("code", "state", "iss", "error")


@get("/{slug:str}/oidc/callback", include_in_schema=False)
async def oidc_callback(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    login = tenant.settings.login
    query = request.query_params
    params = {name: str(query[name])[:4096] for name in _PARAMETERS if name in query}
    if login is not None and login.type == "oidc" and await is_test_state(ctx.redis, tenant.tenant_id,
                                                                           params.get("state", "")):
        return Redirect(f"{ctx.settings.console_base_url}/settings/login/test-result?{urlencode(params)}",
                        status_code=303, headers=PAGE_HEADERS)
    flows = FlowStore(ctx.redis)
    flow_id = request.cookies.get(FLOW_COOKIE)
    flow = await flows.get(flow_id)
    if (flow is None or flow_id is None or flow.tenant_id != tenant.tenant_id or login is None
            or login.type != "oidc"):
        return message(tenant, state, "This sign-in has expired", "Start again from your assistant.", 400)
    try:
        vouched = await finish_oidc_login(ctx.pool, ctx.kek, login, tenant_id=tenant.tenant_id, params=params,
                                          flow_id=flow_id, redirect_uri=oidc_redirect_uri(tenant),
                                          now=int(ctx.now().timestamp()), fetcher=ctx.fetcher, redis=ctx.redis)
    except Unavailable:
        raise
    except OidcLoginDenied as exc:
        _log.info("oidc_login_denied", tenant_id=tenant.tenant_id, idp_error=exc.error)
        await flows.end(flow_id)
        await decided(state, tenant, flow, allowed=False)  # refused at the login page, the IdP's
        response = await _denied(state, tenant, flow)
        response.cookies.append(flow_cookie(state, slug, "", max_age=0))
        return response
    except OidcLoginFailed as exc:
        _log.warning("oidc_login_failed", tenant_id=tenant.tenant_id, reason=str(exc.reason), check=exc.check)
        # An answer that was never this flow's (a stale or injected one) leaves the flow to its own answer.
        if exc.reason not in (OidcFailure.UNKNOWN_STATE, OidcFailure.OTHER_BROWSER):
            await flows.end(flow_id)
        if exc.reason is OidcFailure.PROVIDER_DOWN:
            return message(tenant, state, "We could not reach your sign-in service",
                           "It did not answer as expected. Wait a moment, then start again from your assistant.", 502)
        return message(tenant, state, "We could not confirm your sign-in", "Start again from your assistant.", 400)
    flow.account_id, flow.idp_session, flow.login_via = vouched.account_id, vouched.idp_session, "oidc"
    await flows.save(flow_id, flow)
    await reached(state, tenant, flow, "consent")
    return Redirect(f"{tenant.issuer}/consent", status_code=303, cookies=[flow_cookie(state, slug, flow_id)],
                    headers=PAGE_HEADERS)


async def _denied(state: State, tenant: Any, flow: FlowState) -> Response[Any]:
    if flow.kind == "direct":
        request = flow.authorize_request or {}
        return authorization_redirect(str(request.get("redirect_uri", "")), tenant.issuer, error="access_denied",
                                      error_description="The user did not sign in at the company.",
                                      state=str(request.get("state", "")))
    if flow.user_code:
        await state.ctx.devices.deny(tenant.tenant_id, flow.user_code)
    return message(tenant, state, "You did not sign in",
                   f"The sign-in at {tenant.settings.organization_name or 'the company'} was cancelled or refused, "
                   f"so {flow.agent_name} was not given access. You can close this page.")


routes: list[Any] = [oidc_callback]
