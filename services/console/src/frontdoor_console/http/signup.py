"""``POST /api/v1/signup``: create a tenant, its owner and a first API key."""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_httpkit import client_address, current_request_id
from frontdoor_tenancy import tenants
from litestar import Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from ..access import PUBLIC, opt
from .deps import ctx_of, rate_limit
from .problems import PUBLIC_PROBLEMS

__all__ = ["signup"]


class TenantOut(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    slug: str
    organization_name: str
    issuer: str
    created_at: Any


class SignUpOut(msgspec.Struct, frozen=True, kw_only=True):
    tenant: TenantOut
    admin_id: str
    api_key: str
    api_key_id: str
    api_key_prefix: str


@post("/api/v1/signup", status_code=201, tags=["tenants"], summary="Sign up a company", security=[],
      responses=PUBLIC_PROBLEMS, opt=opt(PUBLIC),
      description="Creates the tenant and its owner. The `api_key` is shown only in this response.")
async def signup(data: JSONBody[tenants.SignUp], request: Request[Any, Any, Any], state: State) -> SignUpOut:
    ctx = ctx_of(state)
    client = client_address(request, ctx.settings.trusted_proxies)
    await rate_limit(ctx, f"signup:{client}", limit=ctx.settings.signup_rate_limit, window_s=3600)
    result = await tenants.sign_up(
        ctx.pool, data, kek=ctx.kek, now=ctx.now(),
        session_lifetime_s=int(ctx.settings.session_lifetime.total_seconds()), request_id=current_request_id(),
    )
    t = result.tenant
    return SignUpOut(
        tenant=TenantOut(id=t.id, slug=t.slug, organization_name=t.organization_name,
                         issuer=ctx.issuer_url(t.slug), created_at=t.created_at),
        admin_id=result.admin_id,
        api_key=result.api_key.api_key,
        api_key_id=result.api_key.key.id,
        api_key_prefix=result.api_key.key.prefix,
    )
