"""Issuer discovery: RFC 8414 metadata (both locations) and the JWKS, per tenant.

Unknown slugs get one identical 404 everywhere, so the issuer does not reveal more
about a missing tenant on one path than another.
"""

from __future__ import annotations

from typing import Any

from frontdoor_tenancy import issuer_profile, signing_keys, tenants
from litestar import Response, get
from litestar.datastructures import State
from litestar.params import FromPath

__all__ = ["NOT_FOUND_BODY", "not_found", "routes"]

_CACHE = "public, max-age=300"
NOT_FOUND_BODY: dict[str, str] = {"error": "not_found", "error_description": "No issuer at this address."}
_NOT_FOUND = NOT_FOUND_BODY


def not_found() -> Response[dict[str, str]]:
    """The single answer for any unknown issuer path."""
    return Response(_NOT_FOUND, status_code=404, headers={"Cache-Control": "no-store"})


async def _metadata(state: State, slug: str) -> Response[Any]:
    settings = state.ctx.settings
    async with state.ctx.pool.acquire() as conn:
        doc = await issuer_profile.metadata_for_slug(conn, settings.issuer_base_url, slug, dev=settings.is_dev)
    if doc is None:
        return not_found()
    return Response(doc, headers={"Cache-Control": _CACHE})


@get("/.well-known/oauth-authorization-server/{slug:str}", tags=["discovery"],
     summary="Issuer metadata (RFC 8414 §3.1 path-inserted location)")
async def metadata_path_inserted(slug: FromPath[str], state: State) -> Response[Any]:
    return await _metadata(state, slug)


@get("/{slug:str}/.well-known/oauth-authorization-server", tags=["discovery"],
     summary="Issuer metadata (appended location, for clients that use it)")
async def metadata_appended(slug: FromPath[str], state: State) -> Response[Any]:
    return await _metadata(state, slug)


@get("/{slug:str}/jwks.json", tags=["discovery"], summary="The issuer's public signing keys")
async def jwks(slug: FromPath[str], state: State) -> Response[Any]:
    async with state.ctx.pool.acquire() as conn:
        tenant = await tenants.tenant_by_slug(conn, slug)
        if tenant is None:
            return not_found()
        doc = await signing_keys.jwks(conn, tenant.id, state.ctx.now())
    return Response(doc, headers={"Cache-Control": _CACHE}, media_type="application/jwk-set+json")


routes: list[Any] = [metadata_path_inserted, metadata_appended, jwks]
