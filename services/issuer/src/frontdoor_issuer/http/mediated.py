"""``POST {issuer}/oauth/mediated[/{sign_in_id}]``: Mediated Sign-In (PAP §4.7).

What ``poppy.json`` lists as ``auth.mediated.endpoint``; 404 while the tenant has it off.
Authenticated like a company API: the Session Token with its DPoP proof (one use); the
Session must be live and the agent allowed. The JSON body carries the credentials (or the
one-time code): it is relayed by `MediatedSignIns` and never logged or echoed. Every
answer carries ``Cache-Control: no-store``.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.resource_request import verify_resource_request
from frontdoor_protocol.strict_json import MalformedJSON, loads
from frontdoor_sessions import GrantRefused, MediatedCaller, MediatedSignIns, ReplayCache, find_session
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .feedback import _resource_refusal
from .oauth_errors import NO_STORE, unavailable

__all__ = ["mediated_code", "mediated_start"]

_MAX_BODY = 16 * 1024


async def _caller(request: Request[Any, Any, Any], state: State, tenant: Any, url: str) -> MediatedCaller:
    ctx = state.ctx
    now = ctx.now()
    async with ctx.pool.acquire() as conn:
        keys = await ctx.keys.keyset(conn, tenant.tenant_id, now)
    verified = verify_resource_request(method="POST", url=url, headers=request.headers, keys=keys,
                                       issuer=tenant.issuer, now=int(now.timestamp()),
                                       query_params=list(request.query_params.items()))
    proof = verified.proof
    if proof is None:
        raise ProtocolError("invalid_token", "Mediated Sign-In needs a DPoP-bound Session Token.")
    if not await ReplayCache(ctx.redis).claim("dpop-resource", f"{tenant.tenant_id}\x00{proof.jkt}", proof.jti,
                                              ttl_s=max(proof.accept_until - int(now.timestamp()), 1) + 60):
        raise ProtocolError("invalid_dpop_proof", "The DPoP proof was already used.")
    claims = verified.claims
    async with ctx.pool.acquire() as conn:
        session = await find_session(conn, tenant.tenant_id, claims.sid)
        if session is None or not session.live or session.client_id != claims.client_id:
            raise ProtocolError("invalid_token", "The Session has ended.")
        policy = await get_agent_policy(conn, tenant.tenant_id, client_id=claims.client_id)
        if not is_allowed(policy, claims.client_id):
            raise ProtocolError("invalid_token", "This agent may no longer call here.")
    return MediatedCaller(session_id=session.id, client_id=claims.client_id, user_id=session.user_id, jkt=proof.jkt)


async def _handle(slug: str, request: Request[Any, Any, Any], state: State, sign_in_id: str | None) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    service: MediatedSignIns = state.mediated
    if tenant is None or service.offer(tenant) is None:
        return not_found()
    url = f"{tenant.issuer}/oauth/mediated" + (f"/{sign_in_id}" if sign_in_id else "")
    try:
        caller = await _caller(request, state, tenant, url)
    except ProtocolError as exc:
        return _resource_refusal(exc)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    try:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        raw = await request.body()
        if ctype != "application/json" or len(raw) > _MAX_BODY:
            raise GrantRefused(ProtocolError("invalid_request", "Send the sign-in as JSON."))
        try:
            payload = loads(raw)
        except MalformedJSON:
            raise GrantRefused(ProtocolError("invalid_request", "The body is not valid JSON.")) from None
        del raw
        if sign_in_id is None:
            outcome = await service.start(tenant, caller, payload)
        else:
            outcome = await service.submit_code(tenant, caller, sign_in_id, payload)
    except GrantRefused as exc:
        return Response(exc.error.to_body(), status_code=exc.error.status,
                        headers={**NO_STORE, **exc.headers})
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    return Response(outcome.body, status_code=200, headers={**NO_STORE, **outcome.headers})


@post("/{slug:str}/oauth/mediated", status_code=200)
async def mediated_start(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    return await _handle(slug, request, state, None)


@post("/{slug:str}/oauth/mediated/{sign_in_id:str}", status_code=200)
async def mediated_code(slug: FromPath[str], sign_in_id: FromPath[str], request: Request[Any, Any, Any],
                        state: State) -> Response[Any]:
    return await _handle(slug, request, state, sign_in_id)
