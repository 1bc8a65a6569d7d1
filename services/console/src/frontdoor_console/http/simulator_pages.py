"""The agent simulator (``/simulator``): admins and owners run it, viewers read the page.

``GET /simulator`` shows the simulator's identity, a Run button and the latest runs;
``POST /simulator`` (write permission, so a viewer gets 403) runs the steps up to Device
Sign-In (its form's ``include_operation=yes``, off by default, adds the operation step, which
calls the company's real perform webhook) and renders the exchanges server-side (no JavaScript needed). The run then waits,
KEK-encrypted in Redis (`frontdoor_console.simulator.pending`), while the admin signs in as
a test user in another tab; ``POST /simulator-runs/{id}/continue`` (the page's button, and
htmx's poll of it at the issuer's interval) polls once when due and, once the sign-in is
granted, denied or expired, runs the last steps and keeps the run in the history
(`frontdoor_console.simulator.history`). A Direct Sign-In comes back instead to
``GET /simulator/{slug}/callback`` (the simulator's ``redirect_uri``, in the admin's own
browser, so their console session): its ``state`` names the run and must match it whole;
the run is taken out of Redis before the code is redeemed, so a code is redeemed once. ``GET /simulator-runs/{id}`` is one stored run (any role; a
run of another tenant is a 404). ``GET /simulator/{slug}/agent.json`` and ``jwks.json`` are
the simulator agent's public Client ID Metadata Document and keys, fetched by the issuer
like any agent's.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import Any

from frontdoor_core.errors import NotFound
from frontdoor_core.ids import new_id
from frontdoor_tenancy import tenants
from litestar import Request, Response, Router, get, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.params import FromPath
from litestar.response import Template

from ..access import PUBLIC, opt
from ..simulator import (
    LISTED,
    PendingRun,
    PendingRuns,
    get_run,
    latest_runs,
    load_identity,
    operation_target,
    record_run,
    redeem,
    register_client_id,
    resume,
    simulate,
    status_of,
)
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
        target = await operation_target(conn, console.tenant.id)
    return console.page("simulator.html", nav="simulator", identity=identity, runs=runs, target=target,
                        listed=LISTED, status_of=status_of, organization_name=console.tenant.organization_name,
                        **{"steps": None, "run_id": None, "prompt": None, "notice": None, **context})


def _pending(state: State) -> PendingRuns:
    ctx = ctx_of(state)
    return PendingRuns(ctx.redis, ctx.kek)


def _prompt(run: PendingRun, now: datetime) -> dict[str, Any]:
    """What the page shows of a waiting sign-in: the links and user code, never the device code."""
    wait = run.wait
    shown: dict[str, Any] = {"run_id": run.run_id, "expires_at": datetime.fromtimestamp(wait.expires_at, UTC),
                             "poll_s": wait.interval, "polls": wait.polls, "domain": wait.company_domain,
                             "direct": wait.direct is not None}
    if wait.device is not None:
        shown.update(user_code=wait.device.user_code, verification_uri=wait.device.verification_uri,
                     verification_uri_complete=wait.device.verification_uri_complete)
    if wait.direct is not None:
        shown["authorize_url"] = wait.direct.authorize_url  # state and the S256 challenge: no secret
    return shown


async def _finish(console: Console, state: State, run: PendingRun) -> str:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        return await record_run(conn, console.tenant.id, run.steps, member_id=run.member_id,
                                member_email=run.member_email, started_at=run.started_at, finished_at=ctx.now(),
                                run_id=run.run_id)


@get("/simulator")
async def simulator_page(console: Console, state: State) -> Template:
    identity = await _identity(state, console.tenant.id, console.tenant.slug)
    return await _page(console, state, identity)


async def _include_operation(request: Request[Any, Any, Any]) -> bool:
    """The run form's "Include an operation" checkbox (off unless ticked: it sends a real perform webhook)."""
    return (await request.form()).get("include_operation") == "yes"


@post("/simulator")
async def run_simulator(request: Request[Any, Any, Any], console: Console, state: State) -> Template:
    ctx = ctx_of(state)
    console.require("write")
    include_operation = await _include_operation(request)
    identity = await _identity(state, console.tenant.id, console.tenant.slug)
    started = ctx.now()
    async with ctx.pool.acquire() as conn:
        # Before its first request: the funnel and metering leave this client_id out.
        await register_client_id(conn, console.tenant.id, identity.client_id, now=started)
        run_id = new_id("sim")
        steps, wait = await simulate(conn, identity, ctx.fetcher, tenant_id=console.tenant.id,
                                     slug=console.tenant.slug, base_url=ctx.settings.issuer_base_url, now=started,
                                     dev=ctx.settings.is_dev, run_id=run_id)
    run = PendingRun(run_id=run_id, tenant_id=console.tenant.id, member_id=console.session.admin.id,
                     member_email=console.session.admin.email, started_at=started, steps=steps,
                     wait=wait, include_operation=include_operation) if wait is not None else None
    if run is None:
        async with ctx.pool.acquire() as conn:
            await record_run(conn, console.tenant.id, steps, member_id=console.session.admin.id,
                             member_email=console.session.admin.email, started_at=started, finished_at=ctx.now(),
                             run_id=run_id)
        return await _page(console, state, identity, steps=steps, run_id=run_id)
    await _pending(state).save(run, now=int(started.timestamp()))
    return await _page(console, state, identity, steps=steps, prompt=_prompt(run, started))


async def _finished_or_gone(console: Console, state: State, identity: Any, run_id: str) -> Template:
    """A run no longer waiting: its history link when it was recorded, else a 404 (expired, or never this tenant's)."""
    async with ctx_of(state).pool.acquire() as conn:
        done = await get_run(conn, console.tenant.id, run_id)
    if done is None:
        raise NotFound("not_found", "No such simulator run waiting for its sign-in (it may have expired).")
    return await _page(console, state, identity, run_id=run_id, notice="finished")


@post("/simulator-runs/{run_id:str}/continue")
async def continue_run(run_id: FromPath[str], console: Console, state: State) -> Template:
    """Poll a waiting run's sign-in once (when due); finish the run once it is over.

    Under the run's owner-token lock, the run is read again (what was read before the lock may
    be stale: another continue may have polled or finished it meanwhile); a continue that finds
    the lock held answers the run as it is, in progress, and polls nothing.
    """
    ctx = ctx_of(state)
    console.require("write")
    identity = await _identity(state, console.tenant.id, console.tenant.slug)
    run_id = run_id[:64]
    pending = _pending(state)
    run = await pending.load(console.tenant.id, run_id)
    if run is None:
        return await _finished_or_gone(console, state, identity, run_id)
    lock = await pending.lock(console.tenant.id, run_id)
    if lock is None:
        return await _page(console, state, identity, steps=run.steps, prompt=_prompt(run, ctx.now()))
    try:
        run = await pending.load(console.tenant.id, run_id)
        if run is None:
            return await _finished_or_gone(console, state, identity, run_id)
        now = ctx.now()
        async with ctx.pool.acquire() as conn:
            over = await resume(conn, run, identity, ctx.fetcher, slug=console.tenant.slug,
                                base_url=ctx.settings.issuer_base_url, ledger_base_url=ctx.settings.ledger_base_url,
                                now=now)
        if not over:
            await pending.save(run, now=int(now.timestamp()), lock=lock)  # not once the lock is another's
            return await _page(console, state, identity, steps=run.steps, prompt=_prompt(run, now))
        if await pending.take(console.tenant.id, run_id) is None:
            return await _finished_or_gone(console, state, identity, run_id)  # another request ended it
        await _finish(console, state, run)
    finally:
        await pending.unlock(console.tenant.id, run_id, lock)
    return await _page(console, state, identity, steps=run.steps, run_id=run_id)


@get("/simulator/{slug:str}/callback")
async def direct_callback(slug: FromPath[str], request: Request[Any, Any, Any], console: Console,
                          state: State) -> Template:
    """Direct Sign-In's return (the simulator's ``redirect_uri``): ``state`` names the run; the code is redeemed once.

    The run is taken out of Redis whole (GETDEL) before the code is redeemed, and ``state``
    checked against what was taken: of two returns at once, one redeems, the other is a 404.
    """
    ctx = ctx_of(state)
    console.require("write")
    params = {k: request.query_params[k][:4096] for k in ("code", "state", "iss", "error")
              if k in request.query_params}
    run_id = params.get("state", "").split("~", 1)[0][:64]
    pending = _pending(state)

    def matches(found: PendingRun | None) -> bool:
        direct = found.wait.direct if found is not None else None
        return direct is not None and hmac.compare_digest(direct.state, params.get("state", ""))

    # Read first, so a forged state takes nothing and the run still waits for its own.
    run = await pending.load(console.tenant.id, run_id) if slug == console.tenant.slug and run_id else None
    if run is None or not matches(run):
        raise NotFound("not_found", "No simulator run is waiting for this sign-in (it may have finished or expired).")
    lock = await pending.lock(console.tenant.id, run_id)
    if lock is None:
        raise NotFound("not_found", "This sign-in is being finished already.")
    try:
        run = await pending.take(console.tenant.id, run_id)  # the code is redeemed once, whatever comes of it
        if run is None or not matches(run):
            raise NotFound("not_found", "This sign-in is being finished already.")
        identity = await _identity(state, console.tenant.id, console.tenant.slug)
        async with ctx.pool.acquire() as conn:
            await redeem(conn, run, identity, ctx.fetcher, slug=console.tenant.slug,
                         base_url=ctx.settings.issuer_base_url, ledger_base_url=ctx.settings.ledger_base_url,
                         now=ctx.now(), params=params)
        await _finish(console, state, run)
    finally:
        await pending.unlock(console.tenant.id, run_id, lock)
    return await _page(console, state, identity, steps=run.steps, run_id=run_id)


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
router = Router(path="/", route_handlers=[simulator_page, run_simulator, continue_run, direct_callback, simulator_run],
                dependencies={"console": Provide(provide_console)}, exception_handlers=EXCEPTION_HANDLERS,
                include_in_schema=False)
