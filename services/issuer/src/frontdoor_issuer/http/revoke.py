"""``POST {issuer}/oauth/revoke``: token revocation (RFC 7009, PAP §4.9).

Client-authenticated. Revoking an Account Token revokes its sign-in (rotations
included) and signs out every Session signed in from it. Unknown tokens, other
clients' and other tenants' tokens are answered 200 and left untouched (RFC 7009 §2.2).
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_httpkit import client_address, current_request_id
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import GrantRefused, Revocation, RevocationRequest, await_streams
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .form import read_form
from .oauth_errors import NO_STORE, oauth_error, unavailable

__all__ = ["revoke"]


@post("/{slug:str}/oauth/revoke", status_code=200)
async def revoke(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    try:
        form = await read_form(request)
    except ProtocolError as exc:
        return oauth_error(exc)
    req = RevocationRequest(
        token=form.get("token"), token_type_hint=form.get("token_type_hint"), client_id=form.get("client_id"),
        client_assertion_type=form.get("client_assertion_type"), client_assertion=form.get("client_assertion"),
        client_address=client_address(request, state.ctx.settings.trusted_proxies),
    )
    revocation: Revocation = state.revocation
    try:
        await revocation.revoke(tenant, req, request_id=current_request_id())
    except GrantRefused as exc:
        return oauth_error(exc.error, exc.headers)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    # "The next request is refused" at receivers answering from memory (ADR 0005).
    await await_streams(ctx.pool, tenant.tenant_id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    return Response({}, status_code=200, headers=NO_STORE)
