"""``GET {issuer}/oidc/jwks.json``: Frontdoor's public client key for the company's IdP.

For an ``oidc`` connection whose ``token_endpoint_auth_method`` is ``private_key_jwt``,
the admin registers this URL as Frontdoor's ``jwks_uri`` at the IdP, which verifies the
client assertions Frontdoor signs at its token endpoint with it (RFC 7523, OIDC Core §9).
Public keys only, newest first: during a rotation also the key being replaced, until it
expires (`frontdoor_tenancy.oidc_client_key`); 404 for any other connection.
"""

from __future__ import annotations

from typing import Any

from frontdoor_tenancy.oidc_client_key import public_client_jwks
from litestar import Response, get
from litestar.datastructures import State
from litestar.params import FromPath

from .discovery import not_found

__all__ = ["routes"]


@get("/{slug:str}/oidc/jwks.json", include_in_schema=False)
async def oidc_client_jwks(slug: FromPath[str], state: State) -> Response[Any]:
    ctx = state.ctx
    tenant = await ctx.tenant(slug)
    login = tenant.settings.login if tenant is not None else None
    if tenant is None or login is None or login.type != "oidc" or login.token_endpoint_auth_method != "private_key_jwt":
        return not_found()
    async with ctx.pool.acquire() as conn:
        jwks = await public_client_jwks(conn, tenant.tenant_id, now=ctx.now())
    return Response(jwks, media_type="application/jwk-set+json", headers={"Cache-Control": "public, max-age=300"})


routes: list[Any] = [oidc_client_jwks]
