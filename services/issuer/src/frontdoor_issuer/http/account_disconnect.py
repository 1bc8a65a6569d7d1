"""``POST {issuer}/accounts/disconnect``: the company's own account pages disconnect agents.

Authenticated with a resource-server credential of the tenant (as introspection is),
JSON ``{"account": "...", "client_id": "..."?}``: every sign-in of the account (only that
agent's when ``client_id`` is given) is revoked and its Sessions signed out (PAP §4.9).
Audited as the system acting through that credential. Refusals are RFC 9457
``application/problem+json`` (:mod:`.company_problems`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_httpkit import current_request_id
from frontdoor_protocol.strict_json import MalformedJSON, loads
from frontdoor_sessions import MAX_ACCOUNT_ID, await_streams, disconnect_account, identify_credential
from frontdoor_tenancy.actor import Actor
from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import FromPath

from .company_problems import account_problem, credential_refused, no_issuer
from .oauth_errors import NO_STORE

__all__ = ["account_disconnect"]

_MAX_CLIENT_ID = 2048


def _text(value: object, limit: int) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= limit and "\x00" not in value and value.strip() == value:
        return value
    return None


@post("/{slug:str}/accounts/disconnect", status_code=200)
async def account_disconnect(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    if tenant is None:
        return no_issuer()
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    async with ctx.pool.acquire() as conn:
        cred_id = (await identify_credential(conn, tenant.tenant_id, credential.strip())
                   if scheme.lower() == "bearer" else None)
    if cred_id is None:
        return credential_refused()
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return account_problem(400, "invalid_request", "Send a JSON object.")
    try:
        body = loads(await request.body())
    except MalformedJSON:
        return account_problem(400, "invalid_request", "Send a JSON object.")
    account = _text(body.get("account"), MAX_ACCOUNT_ID) if isinstance(body, dict) else None
    raw_client = body.get("client_id") if isinstance(body, dict) else None
    client_id = None if raw_client is None else _text(raw_client, _MAX_CLIENT_ID)
    if account is None or (raw_client is not None and client_id is None) or set(body) - {"account", "client_id"}:
        return account_problem(400, "invalid_request", "account (and optionally client_id) are required.")
    actor = Actor(tenant_id=tenant.tenant_id, type="system", id=cred_id, request_id=current_request_id())
    async with transaction(ctx.pool) as conn:
        done = await disconnect_account(conn, actor, account_id=account, client_id=client_id, now=ctx.now(),
                                        via="resource_credential")
    # ADR 0005
    await await_streams(ctx.pool, tenant.tenant_id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    return Response({"account": account, "client_id": client_id, **msgspec.structs.asdict(done)},
                    status_code=200, headers=NO_STORE)
