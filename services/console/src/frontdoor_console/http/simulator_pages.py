"""The agent simulator (``/simulator``): admins and owners run it, viewers read the page.

``GET /simulator`` shows the simulator's identity, a Run button and the latest runs;
``POST /simulator`` (write permission, so a viewer gets 403) runs every step, keeps the run
in the history (`frontdoor_console.simulator.history`) and renders the exchanges
server-side (no JavaScript). ``GET /simulator-runs/{id}`` is one stored run (any role; a
run of another tenant is a 404). ``GET /simulator/{slug}/agent.json`` and ``jwks.json`` are
the simulator agent's public Client ID Metadata Document and keys, fetched by the issuer
like any agent's.
"""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import NotFound
from frontdoor_tenancy import tenants
from litestar import Response, Router, get, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import FromPath
from litestar.response import Template

from ..access import PUBLIC, opt
from ..simulator import LISTED, get_run, latest_runs, load_identity, record_run, register_client_id, simulate, status_of
from .deps import ctx_of
from .page import EXCEPTION_HANDLERS, Console, provide_console

__all__ = ["public_routes", "router"]

_CACHE = {"Cache-Control": "max-age=300"}


async def _identity(state: State, tenant_id: str, slug: str) -> Any:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        return await load_identity(conn, ctx.kek, tenant_id, slug, console_base_url=ctx.settings.console_base_url,
                                   now=ctx.now())


async def _page(console: Console, state: State, identity: Any, **context: Any) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        runs = await latest_runs(conn, console.tenant.id, limit=LISTED)
    return console.page("simulator.html", nav="simulator", identity=identity, runs=runs,
                        listed=LISTED, status_of=status_of, **{"steps": None, "run_id": None, **context})


@get("/simulator")
async def simulator_page(console: Console, state: State) -> Template:
    identity = await _identity(state, console.tenant.id, console.tenant.slug)
    return await _page(console, state, identity)


@post("/simulator")
async def run_simulator(console: Console, state: State) -> Template:
    ctx = ctx_of(state)
    console.require("write")
    identity = await _identity(state, console.tenant.id, console.tenant.slug)
    started = ctx.now()
    async with ctx.pool.acquire() as conn:
        # Before its first request: the funnel and metering leave this client_id out.
        await register_client_id(conn, console.tenant.id, identity.client_id, now=started)
        steps = await simulate(conn, identity, ctx.fetcher, tenant_id=console.tenant.id, slug=console.tenant.slug,
                               base_url=ctx.settings.issuer_base_url, now=started, dev=ctx.settings.is_dev)
        run_id = await record_run(conn, console.tenant.id, steps, member_id=console.session.admin.id,
                                  member_email=console.session.admin.email, started_at=started,
                                  finished_at=ctx.now())
    return await _page(console, state, identity, steps=steps, run_id=run_id)


@get("/simulator-runs/{run_id:str}")
async def simulator_run(run_id: FromPath[str], console: Console, state: State) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        run = await get_run(conn, console.tenant.id, run_id[:64])
    if run is None:
        raise NotFound("not_found", "No such simulator run.")
    return console.page("simulator_run.html", nav="simulator", run=run)


async def _public_identity(state: State, slug: str) -> Any:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        tenant = await tenants.tenant_by_slug(conn, slug)
    if tenant is None:
        raise NotFound("not_found", "No such simulator agent.")
    return await _identity(state, tenant.id, tenant.slug)


@get("/simulator/{slug:str}/agent.json", opt=opt(PUBLIC), include_in_schema=False)
async def simulator_metadata(slug: str, state: State) -> Response[Any]:
    identity = await _public_identity(state, slug)
    return Response(identity.metadata(), headers=_CACHE, media_type="application/json")


@get("/simulator/{slug:str}/jwks.json", opt=opt(PUBLIC), include_in_schema=False)
async def simulator_jwks(slug: str, state: State) -> Response[Any]:
    identity = await _public_identity(state, slug)
    return Response(identity.jwks(), headers=_CACHE, media_type="application/json")


public_routes = [simulator_metadata, simulator_jwks]
router = Router(path="/", route_handlers=[simulator_page, run_simulator, simulator_run],
                dependencies={"console": Provide(provide_console)}, exception_handlers=EXCEPTION_HANDLERS,
                include_in_schema=False)
