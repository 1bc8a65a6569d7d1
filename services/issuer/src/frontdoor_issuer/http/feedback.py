"""``POST {issuer}/feedback``: agents report what they could not do (PAP §8).

Authenticated exactly like a company API: a Session Token (signed in or not, no scope)
with its DPoP proof; the Session must still be live.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import Unavailable
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError, Surface
from frontdoor_protocol.resource_request import MissingToken, verify_resource_request
from frontdoor_protocol.strict_json import MalformedJSON, loads
from frontdoor_sessions import ReplayCache, find_session
from frontdoor_sessions.feedback import parse_report, record_feedback
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found
from .oauth_errors import NO_STORE, unavailable

__all__ = ["feedback"]


def _resource_refusal(exc: ProtocolError) -> Response[Any]:
    headers = dict(NO_STORE)
    # RFC 6750 §3.1: a request with no credential gets a challenge without an error code.
    challenge = 'DPoP algs="ES256"' if isinstance(exc, MissingToken) else exc.challenge(algs=("ES256",))
    if challenge:
        headers["WWW-Authenticate"] = challenge
    return Response(exc.to_body(), status_code=exc.status_at(Surface.RESOURCE), headers=headers)


@post("/{slug:str}/feedback", status_code=202)
async def feedback(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return not_found()
    now = ctx.now()
    url = f"{tenant.issuer}/feedback"
    try:
        async with ctx.pool.acquire() as conn:
            keys = await ctx.keys.keyset(conn, tenant.tenant_id, now)
        caller = verify_resource_request(method="POST", url=url, headers=request.headers, keys=keys,
                                         issuer=tenant.issuer, now=int(now.timestamp()),
                                         query_params=list(request.query_params.items()))
        if caller.proof is not None and not await ReplayCache(ctx.redis).claim(
                "dpop-resource", f"{tenant.tenant_id}\x00{caller.proof.jkt}", caller.proof.jti,
                ttl_s=max(caller.proof.accept_until - int(now.timestamp()), 1) + 60):
            raise ProtocolError("invalid_dpop_proof", "The DPoP proof was already used.")
        claims = caller.claims
        async with ctx.pool.acquire() as conn:
            session = await find_session(conn, tenant.tenant_id, claims.sid)
            if session is None or not session.live or session.client_id != claims.client_id:
                raise ProtocolError("invalid_token", "The Session has ended.")
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=claims.client_id)
            if not is_allowed(policy, claims.client_id):
                raise ProtocolError("invalid_token", "This agent may no longer call here.")
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return Response({"error": "invalid_request", "error_description": "Send the report as JSON."},
                                status_code=400, headers=NO_STORE)
            try:
                report = parse_report(loads(await request.body()))
            except MalformedJSON:
                raise ProtocolError("invalid_request", "The report is not valid JSON.") from None
            await record_feedback(conn, tenant.tenant_id, session_id=session.id, client_id=claims.client_id,
                                  user_id=claims.sub, report=report, now=now)
    except ProtocolError as exc:
        if exc.code == "invalid_request":
            return Response(exc.to_body(), status_code=400, headers=NO_STORE)
        return _resource_refusal(exc)
    except Unavailable as exc:
        return unavailable(exc.retry_after)
    return Response(b"", status_code=202, headers=NO_STORE, media_type="application/json")
