"""``GET {issuer}/accounts/{account}/agents``: the agents connected to one of the company's accounts.

For the company's own account pages ("connected agents"), next to
``POST {issuer}/accounts/disconnect``. Authenticated with a resource-server credential of
the tenant (as introspection is). ``{account}`` is the company's account ID, percent-encoded.
The answer lists each agent with a live sign-in to the account::

    {"account": "acct_ada", "agents": [{"client_id": "https://agent.example/client.json",
      "client_name": "Poppy", "logo_uri": null, "scope": "orders:read",
      "connected_at": "...", "last_signed_in_at": "...", "last_refreshed_at": "...", "sign_ins": 1,
      "simulator": false}]}

``client_name`` is the agent's own words: escape it. Nothing here is a secret, but who is
connected to whom is private: only the company's servers may ask. Refusals are RFC 9457
``application/problem+json`` (:mod:`.company_problems`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_sessions import MAX_ACCOUNT_ID, identify_credential
from frontdoor_sessions.connected_agents import connected_agents
from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.params import FromPath

from .company_problems import account_problem, credential_refused, no_issuer
from .oauth_errors import NO_STORE

__all__ = ["account_agents"]

@get("/{slug:str}/accounts/{account:str}/agents")
async def account_agents(slug: FromPath[str], account: FromPath[str], request: Request[Any, Any, Any],
                         state: State) -> Response[Any]:
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
        if not 0 < len(account) <= MAX_ACCOUNT_ID or account.strip() != account or "\x00" in account:
            return account_problem(400, "invalid_request", "account must be 1 to 255 characters.")
        agents = await connected_agents(conn, tenant.tenant_id, account)
    return Response({"account": account, "agents": [msgspec.to_builtins(a) for a in agents]},
                    status_code=200, headers=NO_STORE)
