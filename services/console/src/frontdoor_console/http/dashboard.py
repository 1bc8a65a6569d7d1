"""The admin dashboard: overview, domains, agents, API keys, audit log, and (from their own
modules) Sessions and accounts, the team, issuer settings, resource-server credentials,
feedback, sign-up, invitations and password change.

Server-rendered pages progressively enhanced with htmx. Every page and fragment reads the
tenant from the signed-in admin's session, never from the URL. Every POST is CSRF-checked
(Litestar's CSRF middleware: form field or ``x-csrftoken`` header), refused with 403 for
viewers, and every destructive action needs an explicit confirmation step first; the
domain use cases write the audit rows.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Annotated, Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_identity import check_client_id, list_agents
from frontdoor_operations import overview as op_overview
from frontdoor_sessions import await_streams
from frontdoor_sessions.agent_blocking import block_and_end_sessions, unblock
from frontdoor_sessions.session_activity import session_activity, session_trends
from frontdoor_tenancy import api_keys, audit, domain_claims, issuer_profile
from frontdoor_tenancy.tenant_overview import audit_actions, tenant_counts
from litestar import Request, Response, Router, get, post
from litestar.datastructures import ResponseHeader, State
from litestar.di import Provide
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from ..access import opt
from ..policy import lifecycle_policy
from . import (
    account_pages,
    billing_pages,
    charts,
    conversation_pages,
    conversation_settings_pages,
    credential_pages,
    operation_pages,
    session_pages,
    settings_pages,
    team_pages,
    webhook_pages,
)
from .deps import ctx_of
from .operations_api import operations_endpoint
from .page import EXCEPTION_HANDLERS, FORM, Console, is_htmx, provide_console

__all__ = ["router"]

_FORM = FORM
_CSV_MAX_ROWS = 10_000
_PAGE = 50

# Fixed notices selected by a query parameter: nothing the URL carries is echoed.
_NOTICES = {
    "domain_added": "Domain added. Publish the TXT record below, then verify.",
    "agent_blocked": "Agent blocked; its live Sessions have ended.",
    "agent_unblocked": "Agent unblocked.",
    "agent_unchanged": "Nothing changed.",
    "key_revoked": "API key revoked; it stops working at once.",
}


# ---------------------------------------------------------------- overview


@get("/", name="dashboard.overview")
async def overview(console: Console, state: State) -> Template:
    ctx = ctx_of(state)
    now = ctx.now()
    days, days_since = charts.chart_days(now)
    tenant_id = console.tenant.id
    async with ctx.pool.acquire() as conn:
        counts = await tenant_counts(conn, tenant_id)
        activity = await session_activity(conn, tenant_id, since=now - timedelta(hours=24))
        trends = await session_trends(conn, tenant_id, now=now, days_since=days_since)
        ops_24h = await op_overview.count_by_state(conn, tenant_id, since=now - timedelta(hours=24))
        ops_30d = await op_overview.count_by_state(conn, tenant_id, since=now - timedelta(days=30))
        stuck = await op_overview.count_stuck(conn, tenant_id, now=now)
        deliveries = await op_overview.delivery_health(conn, tenant_id, now=now)
        ops_daily = await op_overview.daily_operations(conn, tenant_id, since=days_since)
        failed_daily = await op_overview.failed_attempts_by_day(conn, tenant_id, since=days_since)
    attention = {s: n for s, n in counts.domains_by_status.items() if s in ("pending", "suspended") and n}
    needs_attention = bool(attention or stuck or deliveries.disabled_endpoints or deliveries.failing_endpoints)
    trend_charts = [
        charts.bar_chart("sessions", "Sessions started", "Sessions started", days,
                         [("sessions", "started", trends.started_by_day)]),
        charts.bar_chart("operations", "Operations proposed", "operations proposed", days, [
            ("succeeded", "succeeded", {d: o.succeeded for d, o in ops_daily.items()}),
            ("failed", "failed", {d: o.failed for d, o in ops_daily.items()}),
            ("other", "open, cancelled or expired",
             {d: o.proposed - o.succeeded - o.failed for d, o in ops_daily.items()}),
        ]),
        charts.bar_chart("failed-attempts", "Failed delivery attempts", "failed delivery attempts", days,
                         [("failed", "failed", failed_daily)]),
    ]
    return console.page("overview.html", nav="overview", counts=counts, activity=activity, trends=trends,
                        attention=attention, issuer=ctx.issuer_url(console.tenant.slug), ops_24h=ops_24h,
                        ops_30d=ops_30d, op_states=op_overview.STATES, stuck=stuck, deliveries=deliveries,
                        needs_attention=needs_attention, charts=trend_charts)


# ---------------------------------------------------------------- domains


class DomainForm(msgspec.Struct, frozen=True, kw_only=True):
    domain: str = ""


async def _domains_page(console: Console, state: State, *, error: str | None = None, value: str = "",
                        notice: str | None = None, status_code: int = 200) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        rows = await domain_claims.list_domains(conn, console.tenant.id)
    return console.page("domains.html", nav="domains", domains=rows, error=error, value=value,
                        notice=_NOTICES.get(notice or ""), status_code=status_code)


@get("/domains")
async def domains_page(console: Console, state: State,
                       notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _domains_page(console, state, notice=notice)


@post("/domains")
async def domains_add(data: Annotated[DomainForm, _FORM], console: Console, state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    try:
        async with transaction(ctx.pool) as conn:
            await billing_pages.require_room(state, conn, console.tenant.id, "domains")
            await domain_claims.add_domain(conn, console.actor, data.domain, now=ctx.now(),
                                           policy=lifecycle_policy(ctx.settings))
    except (Invalid, Conflict) as exc:
        return await _domains_page(console, state, error=exc.detail, value=data.domain[:253], status_code=422)
    return Redirect("/domains?notice=domain_added", status_code=303)


@post("/domains/{domain:str}/verify")
async def domains_verify(domain: FromPath[str], console: Console, state: State,
                         request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    view = await domain_claims.check_domain(ctx.pool, console.actor, domain, lookup=ctx.txt_lookup, now=ctx.now(),
                                            policy=lifecycle_policy(ctx.settings), manual=True)
    if is_htmx(request):
        return Template("_domain_row.html", context={"d": view, "can_write": console.can_write})
    return Redirect("/domains", status_code=303)


@get("/domains/{domain:str}/poppy.json")
async def domains_poppy_json(domain: FromPath[str], console: Console, state: State) -> Response[Any]:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        doc = await issuer_profile.discovery_document(
            conn, console.tenant.id, ctx.settings.issuer_base_url, domain, dev=ctx.settings.is_dev,
            operations_endpoint=await operations_endpoint(conn, ctx.settings, console.tenant.id),
            ledger_base_url=ctx.settings.ledger_base_url)
    return Response(json.dumps(doc, indent=2) + "\n", media_type="application/json")


# ---------------------------------------------------------------- agents


class AgentForm(msgspec.Struct, frozen=True, kw_only=True):
    client_id: str = ""
    confirm: str = ""


_AGENT_ACTIONS = {
    "block": ("Block this agent?", "It is refused from now on and every live Session it holds ends at once, "
              "so its tokens stop working on its next request.", "Block agent"),
    "unblock": ("Unblock this agent?", "It may start Sessions again (subject to your agent policy).",
                "Unblock agent"),
}


def _agent_confirm(console: Console, action: str, client_id: str) -> Template:
    title, message, button = _AGENT_ACTIONS[action]
    return console.page("confirm.html", nav="agents", title=title, message=message, subject=client_id,
                        action=f"/agents/{action}", button=button, cancel="/agents", danger=action == "block",
                        fields={"client_id": client_id})


@get("/agents")
async def agents_page(console: Console, state: State,
                      notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        rows = await list_agents(conn, console.tenant.id, limit=200)
    return console.page("agents.html", nav="agents", agents=rows, notice=_NOTICES.get(notice or ""))


@get("/agents/{action:str}")
async def agents_confirm(action: FromPath[str], console: Console, state: State,
                         client_id: str = Parameter(max_length=2048)) -> Template:
    if action not in _AGENT_ACTIONS:
        raise NotFound("not_found", "No such page.")
    return _agent_confirm(console, action, client_id)


@post("/agents/{action:str}")
async def agents_act(action: FromPath[str], data: Annotated[AgentForm, _FORM], console: Console,
                     state: State) -> Response[Any]:
    if action not in _AGENT_ACTIONS:
        raise NotFound("not_found", "No such page.")
    console.require("write")
    ctx = ctx_of(state)
    try:
        cid = check_client_id(data.client_id, allow_http_loopback=ctx.settings.is_dev)
    except Exception:
        raise Invalid("invalid_client_id", "client_id must be the agent's https metadata URL.") from None
    if data.confirm != "yes":
        return _agent_confirm(console, action, cid)
    async with transaction(ctx.pool) as conn:
        if action == "block":
            done = await block_and_end_sessions(conn, console.actor, cid, now=ctx.now())
        else:
            done = await unblock(conn, console.actor, cid)
    if action == "block":
        # next request refused (ADR 0005)
        await await_streams(ctx.pool, console.tenant.id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    notice = f"agent_{action}ed" if done.changed else "agent_unchanged"
    return Redirect(f"/agents?notice={notice}", status_code=303)


# ---------------------------------------------------------------- API keys


class KeyForm(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""
    role: str = "admin"


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


async def _keys_page(console: Console, state: State, **context: Any) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        keys = await api_keys.list_keys(conn, console.tenant.id)
    status = context.pop("status_code", 200)
    return console.page("api_keys.html", nav="api_keys", keys=keys, status_code=status,
                        **{"created": None, "error": None, "notice": None, **context})


@get("/api-keys")
async def keys_page(console: Console, state: State,
                    notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _keys_page(console, state, notice=_NOTICES.get(notice or ""))


@post("/api-keys", opt=opt("manage_api_keys"))
async def keys_create(data: Annotated[KeyForm, _FORM], console: Console, state: State) -> Template:
    console.require("manage_api_keys")
    try:
        async with transaction(ctx_of(state).pool) as conn:
            created = await api_keys.create_key(conn, console.actor, data.name, role=data.role)
    except Invalid as exc:
        return await _keys_page(console, state, error=exc.detail, status_code=422)
    # The only response that ever carries the secret: never cached, never rendered again.
    return await _keys_page(console, state, created=created, status_code=201)


async def _key(console: Console, state: State, key_id: str) -> api_keys.ApiKeyView:
    async with ctx_of(state).pool.acquire() as conn:
        keys = await api_keys.list_keys(conn, console.tenant.id)
    for k in keys:
        if k.id == key_id:
            return k
    raise NotFound("api_key_not_found", "No such API key.")


def _key_confirm(console: Console, key: api_keys.ApiKeyView) -> Template:
    return console.page("confirm.html", nav="api_keys", title="Revoke this API key?",
                        message="Every call made with it is refused from now on. This cannot be undone.",
                        subject=f"{key.name} ({key.prefix}…)", action=f"/api-keys/{key.id}/revoke",
                        button="Revoke key", cancel="/api-keys", danger=True, fields={})


@get("/api-keys/{key_id:str}/revoke")
async def keys_revoke_confirm(key_id: FromPath[str], console: Console, state: State) -> Template:
    return _key_confirm(console, await _key(console, state, key_id))


@post("/api-keys/{key_id:str}/revoke", opt=opt("manage_api_keys"))
async def keys_revoke(key_id: FromPath[str], data: Annotated[ConfirmForm, _FORM], console: Console,
                      state: State) -> Response[Any]:
    console.require("manage_api_keys")
    key = await _key(console, state, key_id)
    if data.confirm != "yes":
        return _key_confirm(console, key)
    async with transaction(ctx_of(state).pool) as conn:
        await api_keys.revoke_key(conn, console.actor, key.id)
    return Redirect("/api-keys?notice=key_revoked", status_code=303)


# ---------------------------------------------------------------- audit log


@get("/audit")
async def audit_page(console: Console, state: State,
                     action: str | None = Parameter(default=None, max_length=64),
                     before: str | None = Parameter(default=None, max_length=40)) -> Template:
    action = action or None
    async with ctx_of(state).pool.acquire() as conn:
        rows = await audit.list_entries(conn, console.tenant.id, limit=_PAGE, before=before or None, action=action)
        actions = await audit_actions(conn, console.tenant.id)
    return console.page("audit.html", nav="audit", entries=rows, actions=actions, action=action,
                        next_before=rows[-1].id if len(rows) == _PAGE else None)


def _cell(value: Any) -> str:
    """A CSV cell that a spreadsheet will not evaluate as a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


@get("/audit.csv")
async def audit_csv(console: Console, state: State,
                    action: str | None = Parameter(default=None, max_length=64)) -> Response[str]:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["id", "at", "actor_type", "actor_id", "action", "target_type", "target_id", "request_id", "details"])
    before: str | None = None
    written = 0
    async with ctx_of(state).pool.acquire() as conn:
        while written < _CSV_MAX_ROWS:
            rows = await audit.list_entries(conn, console.tenant.id, limit=200, before=before, action=action or None)
            for e in rows:
                w.writerow([_cell(v) for v in (e.id, e.at.isoformat(), e.actor_type, e.actor_id, e.action,
                                               e.target_type, e.target_id, e.request_id,
                                               json.dumps(e.details, sort_keys=True))])
            written += len(rows)
            if len(rows) < 200:
                break
            before = rows[-1].id
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="audit-log-{console.tenant.slug}.csv"'})


router = Router(
    path="/",
    route_handlers=[overview, domains_page, domains_add, domains_verify, domains_poppy_json, agents_page,
                    agents_confirm, agents_act, keys_page, keys_create, keys_revoke_confirm, keys_revoke,
                    audit_page, audit_csv, *session_pages.routes, *team_pages.routes, *settings_pages.routes,
                    *conversation_settings_pages.routes, *credential_pages.routes, *operation_pages.routes, *conversation_pages.routes, *webhook_pages.routes,
                    *account_pages.dashboard_routes, *account_pages.public_routes],
    dependencies={"console": Provide(provide_console)},
    exception_handlers=EXCEPTION_HANDLERS,
    response_headers=[ResponseHeader(name="Cache-Control", value="no-store")],
    include_in_schema=False,
)
