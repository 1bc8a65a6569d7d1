"""``POST {issuer}/oidc/backchannel-logout``: the company's IdP signs a user out (Back-Channel Logout 1.0).

The ``backchannel_logout_uri`` the admin registers for Frontdoor at its IdP, on when the
connection's ``backchannel_logout`` is. The IdP posts ``logout_token`` as a form (§2.5);
`frontdoor_sessions.oidc_backchannel_logout` checks it and disconnects the account it
names in this tenant. The answer (§2.8): ``200`` once done; ``400`` with
``{"error": "invalid_request"}`` for a token that is refused (the reason is logged, never
echoed); always ``Cache-Control: no-store``. After the revoke committed, the tenant's
streams and introspection cache are brought up to date (ADR 0005) like any disconnect.
"""

from __future__ import annotations

from typing import Any

import structlog
from frontdoor_sessions import await_streams
from frontdoor_sessions.oidc_backchannel_logout import LogoutRefused, backchannel_logout
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .oauth_errors import NO_STORE

__all__ = ["routes"]

_log = structlog.get_logger("frontdoor.issuer.oidc")
_MAX_TOKEN = 16_384


def _refused(description: str) -> Response[dict[str, str]]:
    return Response({"error": "invalid_request", "error_description": description}, status_code=400,
                    headers=NO_STORE)


@post("/{slug:str}/oidc/backchannel-logout", include_in_schema=False, status_code=200)
async def oidc_backchannel_logout(slug: FromPath[str], request: Request[Any, Any, Any],
                                  state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    login = tenant.settings.login if tenant is not None else None
    if tenant is None or login is None or login.type != "oidc" or not login.backchannel_logout:
        return not_found()
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return _refused("Send logout_token as a form.")
    form = await request.form()
    token = form.get("logout_token")
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN:
        return _refused("logout_token is required.")
    try:
        done = await backchannel_logout(ctx.pool, login, tenant_id=tenant.tenant_id, token=token, now=ctx.now(),
                                        fetcher=ctx.fetcher, redis=ctx.redis)
    except LogoutRefused as exc:
        _log.warning("oidc_logout_refused", tenant_id=tenant.tenant_id, reason=exc.reason)
        return _refused("The logout token is not valid.")
    _log.info("oidc_logout", tenant_id=tenant.tenant_id, sign_ins_revoked=done.sign_ins_revoked)
    await await_streams(ctx.pool, tenant.tenant_id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    return Response(b"", status_code=200, headers=NO_STORE)


routes: list[Any] = [oidc_backchannel_logout]
