"""``POST {issuer}/oauth/introspect``: Session state for the company's resource servers."""

from __future__ import annotations

from typing import Any

from frontdoor_core.metrics import INTROSPECTIONS
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import INACTIVE, authenticate_credential, introspect
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .form import read_form
from .oauth_errors import NO_STORE, oauth_error

__all__ = ["introspection"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="frontdoor-introspection"'}


@post("/{slug:str}/oauth/introspect", status_code=200)
async def introspection(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    try:
        form = await read_form(request)
    except ProtocolError as exc:
        return oauth_error(exc)
    async with ctx.pool.acquire() as conn:
        if scheme.lower() != "bearer" or not await authenticate_credential(conn, tenant.tenant_id, credential.strip()):
            INTROSPECTIONS.labels("refused").inc()
            return Response({"error": "invalid_client", "error_description": "Authenticate with a resource-server credential."},
                            status_code=401, headers={**NO_STORE, **_CHALLENGE})
        token = form.get("token")
        if not token:
            return oauth_error(ProtocolError("invalid_request", "token is required."))
        body = await introspect(conn, ctx.keys, tenant_id=tenant.tenant_id, issuer=tenant.issuer, token=token,
                                now=ctx.now())
    INTROSPECTIONS.labels("active" if body else "inactive").inc()
    return Response(body or INACTIVE, status_code=200, headers=NO_STORE)
