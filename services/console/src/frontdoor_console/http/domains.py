"""``/api/v1/domains``: claim a domain, publish the TXT record, verify, read ``poppy.json``."""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_tenancy import domain_claims, issuer_profile
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.publish_check import PublishReport, run_publish_check
from litestar import Response, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from ..access import opt
from ..policy import lifecycle_policy
from . import billing_pages
from .deps import ctx_of, require_writer
from .operations_api import operations_endpoint
from .pagination import CURSOR, LIMIT, cursor_time, decode_cursor, page
from .problems import PROBLEMS

__all__ = ["routes"]


class NewDomain(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    domain: str


class DomainList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[domain_claims.DomainView]
    next_cursor: str | None = None


@post("/api/v1/domains", responses=PROBLEMS, status_code=201, tags=["domains"], summary="Claim a domain",
      description="Answers the TXT record to publish at `_frontdoor-challenge.<domain>`.")
async def add_domain(data: JSONBody[NewDomain], actor: NamedDependency[Actor], state: State) -> domain_claims.DomainView:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        await billing_pages.require_room(state, conn, actor.tenant_id, "domains")
        return await domain_claims.add_domain(conn, actor, data.domain, now=ctx.now(),
                                              policy=lifecycle_policy(ctx.settings))


@get("/api/v1/domains", responses=PROBLEMS, tags=["domains"], summary="List your domains")
async def list_domains(actor: NamedDependency[Actor], state: State, limit: int = LIMIT,
                       cursor: str | None = CURSOR) -> DomainList:
    key = decode_cursor(cursor, 2)
    moment = cursor_time(key[0]) if key else None
    after = (moment, key[1]) if key and moment else None
    async with ctx_of(state).pool.acquire() as conn:
        rows = await domain_claims.list_domains(conn, actor.tenant_id, after=after, limit=limit + 1)
    data, next_cursor = page(rows, limit, lambda d: (d.created_at.isoformat(), d.domain))
    return DomainList(data=data, next_cursor=next_cursor)


@get("/api/v1/domains/{domain:str}", responses=PROBLEMS, tags=["domains"], summary="Read one domain")
async def get_domain(domain: FromPath[str], actor: NamedDependency[Actor], state: State) -> domain_claims.DomainView:
    async with ctx_of(state).pool.acquire() as conn:
        return await domain_claims.get_domain(conn, actor.tenant_id, domain)


@delete("/api/v1/domains/{domain:str}", status_code=204, tags=["domains"], summary="Remove a domain",
        responses=PROBLEMS)
async def delete_domain(domain: FromPath[str], actor: NamedDependency[Actor], state: State) -> None:
    require_writer(actor)
    async with transaction(ctx_of(state).pool) as conn:
        await domain_claims.delete_domain(conn, actor, domain)


@post("/api/v1/domains/{domain:str}/verify", status_code=200, tags=["domains"], summary="Check DNS now",
      responses=PROBLEMS,
      description="Looks the TXT record up now and answers the domain's new state. A DNS error changes nothing.")
async def verify_domain(domain: FromPath[str], actor: NamedDependency[Actor], state: State) -> domain_claims.DomainView:
    require_writer(actor)
    ctx = ctx_of(state)
    return await domain_claims.check_domain(
        ctx.pool, actor, domain, lookup=ctx.txt_lookup, now=ctx.now(),
        policy=lifecycle_policy(ctx.settings), manual=True,
    )


@get("/api/v1/domains/{domain:str}/poppy.json", tags=["domains"], summary="The poppy.json to publish",
     responses=PROBLEMS,
     description="Publish this exact document at `https://<domain>/.well-known/poppy.json` (verified domains only).")
async def poppy_json(domain: FromPath[str], actor: NamedDependency[Actor], state: State) -> Response[dict[str, Any]]:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        doc = await issuer_profile.discovery_document(
            conn, actor.tenant_id, ctx.settings.issuer_base_url, domain, dev=ctx.settings.is_dev,
            operations_endpoint=await operations_endpoint(conn, ctx.settings, actor.tenant_id),
            ledger_base_url=ctx.settings.ledger_base_url)
    return Response(doc, headers={"Cache-Control": "no-store"})


@get("/api/v1/domains/{domain:str}/oauth-protected-resource", tags=["domains"],
     summary="The protected-resource metadata to publish (PAP 1.0)", responses=PROBLEMS,
     description="Publish this exact document at `https://<domain>/.well-known/oauth-protected-resource` "
                 "(RFC 9728; verified domains, while the issuer serves 1.0: else 409 `profile_not_served`).")
async def protected_resource(domain: FromPath[str], actor: NamedDependency[Actor], state: State
                             ) -> Response[dict[str, Any]]:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        doc = await issuer_profile.protected_resource_document(
            conn, actor.tenant_id, ctx.settings.issuer_base_url, domain, dev=ctx.settings.is_dev)
    return Response(doc, headers={"Cache-Control": "no-store"})


@post("/api/v1/domains/{domain:str}/publish-check", responses=PROBLEMS, status_code=200, tags=["domains"],
      opt=opt("read"),  # fetches and reports; changes nothing
      summary="Check the published poppy.json as an agent would",
      description="Fetches the live document and the issuer metadata it names; answers a list of findings.")
async def publish_check(domain: FromPath[str], actor: NamedDependency[Actor], state: State) -> PublishReport:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        return await run_publish_check(conn, actor.tenant_id, domain, fetcher=ctx.fetcher,
                                       base_url=ctx.settings.issuer_base_url, now=ctx.now(), dev=ctx.settings.is_dev)


routes: list[Any] = [add_domain, list_domains, get_domain, delete_domain, verify_domain, poppy_json, protected_resource,
                     publish_check]
