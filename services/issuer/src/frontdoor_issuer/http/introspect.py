"""``POST {issuer}/oauth/introspect``: Session state for the company's resource servers.

:func:`answer` is the endpoint: the lean ASGI route (:mod:`.lean_routes`, mounted in
front of Litestar by ``asgi.py``) and the Litestar handler below both call it, so the
wire format, the client authentication and the errors are one code path.
"""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_core.metrics import INTROSPECTIONS
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import INACTIVE, authenticate_credential, credential_trusted, introspect
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .form import parse_form
from .oauth_errors import NO_STORE

__all__ = ["answer", "introspection"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="frontdoor-introspection"'}
_REFUSED = {"error": "invalid_client", "error_description": "Authenticate with a resource-server credential."}
_encode = msgspec.json.Encoder().encode


class Answer(msgspec.Struct, frozen=True):
    status: int
    body: bytes
    headers: dict[str, str]


async def answer(ctx: Any, slug: str, authorization: str, content_type: str, raw: bytes) -> Answer:
    """The endpoint's answer: 200 with the state, 400/401 ``{"error", ...}``, 404 for an unknown issuer."""
    tenant = await ctx.tenant(slug)
    if tenant is None:
        nf = not_found()
        return Answer(404, _encode(nf.content), {"Cache-Control": "no-store"})
    scheme, _, credential = authorization.partition(" ")
    try:
        form = parse_form(content_type, raw)
    except ProtocolError as exc:
        return Answer(exc.status, _encode(exc.to_body()), NO_STORE)
    credential = credential.strip()
    if scheme.lower() != "bearer" or not (credential_trusted(tenant.tenant_id, credential)
                                          or await _authenticate(ctx, tenant.tenant_id, credential)):
        INTROSPECTIONS.labels("refused").inc()
        return Answer(401, _encode(_REFUSED), {**NO_STORE, **_CHALLENGE})
    token = form.get("token")
    if not token:
        missing = ProtocolError("invalid_request", "token is required.")
        return Answer(missing.status, _encode(missing.to_body()), NO_STORE)
    body = await introspect(ctx.pool.acquire, ctx.keys, tenant_id=tenant.tenant_id, issuer=tenant.issuer, token=token,
                            now=ctx.now(), cache=ctx.introspection_cache)
    INTROSPECTIONS.labels("active" if body.get("active") else "inactive").inc()
    return Answer(200, _encode(body or INACTIVE), NO_STORE)


async def _authenticate(ctx: Any, tenant_id: str, credential: str) -> bool:
    async with ctx.pool.acquire() as conn:
        return await authenticate_credential(conn, tenant_id, credential)


@post("/{slug:str}/oauth/introspect", status_code=200)
async def introspection(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    """The same endpoint through Litestar (an app built with ``create_app`` alone)."""
    a = await answer(state.ctx, slug, request.headers.get("authorization", ""),
                     request.headers.get("content-type", ""), await request.body())
    return Response(a.body, status_code=a.status, headers=a.headers, media_type="application/json")
