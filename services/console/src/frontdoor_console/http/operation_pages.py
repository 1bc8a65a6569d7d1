"""Dashboard pages for the operations ledger and its configuration.

``/operations``: the ledger, filterable by state, kind, agent, account and time, with the
operations stuck in progress highlighted (and a filter for them); the list refreshes
itself through htmx polling of ``/operations/rows``. ``/operations/{id}``: the operation,
each revision with what it changed, the confirmation, the outcome and every attempt of
its perform webhook (polled while it can still change), and **Redeliver…** for that
message (confirmed first; the webhooks library writes the audit row).

``/operation-kinds``: list, create, edit and delete (unused, confirmed first) the kinds;
``frontdoor_operations.kinds`` validates and audits.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_operations import kinds as op_kinds
from frontdoor_operations import ledger
from frontdoor_operations import overview as op_overview
from frontdoor_operations.ledger import ListFilters
from frontdoor_webhooks import attempts as wh_attempts
from frontdoor_webhooks import endpoints as wh
from frontdoor_webhooks import messages as wh_messages
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from .deps import ctx_of
from .page import FORM, Console, confirm_page

__all__ = ["parse_time", "routes"]

POLL_SECONDS = 5
DETAIL_POLL_SECONDS = 3  # an operation's page: its delivery section while it can still change
_PAGE = 50
_MAX_FORM_VALUES = 100
_NOTICES = {
    "redelivered": "Perform webhook queued again (same webhook-id): the next attempt is due now.",
    "kind_saved": "Operation kind saved.",
    "kind_deleted": "Operation kind deleted.",
}
# Time range presets of the filter form: label, hours back.
_RANGES = {"1h": 1, "24h": 24, "7d": 24 * 7, "30d": 24 * 30}


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


def parse_time(raw: str | None, field: str) -> datetime | None:
    """A time typed into a form (``2026-11-30T10:00``, ISO 8601; UTC unless it says otherwise)."""
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise Invalid("invalid_time", f"{field} must be a date and time like 2026-11-30T10:00 (UTC).") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# ---------------------------------------------------------------- the ledger


class _Filters(msgspec.Struct, frozen=True, kw_only=True):
    state: str = ""
    kind: str = ""
    client_id: str = ""
    account: str = ""
    range: str = ""
    since: str = ""
    until: str = ""
    stuck: bool = False

    def query(self, **extra: str) -> str:
        q = {k: v for k, v in msgspec.structs.asdict(self).items() if v and v is not True}
        if self.stuck:
            q["stuck"] = "1"
        q.update({k: v for k, v in extra.items() if v})
        return urlencode(q)

    def active(self) -> bool:
        return any(v for v in msgspec.structs.asdict(self).values())

    def ledger_filters(self, now: datetime) -> ListFilters:
        if self.state and self.state not in op_overview.STATES:
            raise Invalid("invalid_state", "Unknown state.")
        since = parse_time(self.since, "since")
        if self.range in _RANGES and since is None:
            since = now - timedelta(hours=_RANGES[self.range])
        return ListFilters(state=self.state or None, kind=self.kind or None, client_id=self.client_id or None,
                           account=self.account or None, since=since, until=parse_time(self.until, "until"))


def _filters(*, state: str | None, kind: str | None, client_id: str | None, account: str | None, range_: str | None,
             since: str | None, until: str | None, stuck: bool) -> _Filters:
    return _Filters(state=state or "", kind=kind or "", client_id=client_id or "", account=account or "",
                    range=range_ if range_ in _RANGES else "", since=since or "", until=until or "", stuck=stuck)


async def _list(state: State, console: Console, f: _Filters, before: str | None) -> tuple[list[Any], str | None]:
    ctx = ctx_of(state)
    now = ctx.now()
    filters = f.ledger_filters(now)
    async with ctx.pool.acquire() as conn:
        cursor = None
        if before:
            anchor = await ledger.get_operation(conn, console.tenant.id, before)
            if anchor is None:
                raise NotFound("operation_not_found", "No such operation.")
            cursor = (anchor.created_at, anchor.id)
        ops = await op_overview.list_filtered(conn, console.tenant.id, filters, now=now, stuck=f.stuck,
                                              limit=_PAGE, before=cursor)
    rows = [{"op": op, "stuck": op_overview.is_stuck(op, now)} for op in ops]
    return rows, (ops[-1].id if len(ops) == _PAGE else None)


def _op_params() -> dict[str, Any]:
    return {
        "state_": Parameter(query="state", default=None, max_length=20),
        "kind": Parameter(default=None, max_length=64),
        "client_id": Parameter(default=None, max_length=2048),
        "account": Parameter(default=None, max_length=255),
        "range_": Parameter(query="range", default=None, max_length=8),
        "since": Parameter(default=None, max_length=40),
        "until": Parameter(default=None, max_length=40),
    }


_P = _op_params()


@get("/operations")
async def operations_page(console: Console, state: State, *,
                          state_: str | None = _P["state_"], kind: str | None = _P["kind"],
                          client_id: str | None = _P["client_id"], account: str | None = _P["account"],
                          range_: str | None = _P["range_"], since: str | None = _P["since"],
                          until: str | None = _P["until"], stuck: bool = Parameter(default=False),
                          before: str | None = Parameter(default=None, max_length=100)) -> Template:
    f = _filters(state=state_, kind=kind, client_id=client_id, account=account, range_=range_, since=since,
                 until=until, stuck=stuck)
    rows, next_before = await _list(state, console, f, before)
    async with ctx_of(state).pool.acquire() as conn:
        kinds = [k.name for k in await op_kinds.list_kinds(conn, console.tenant.id)]
    return console.page("operations.html", nav="operations", rows=rows, f=f, kinds=kinds, states=op_overview.STATES,
                        ranges=list(_RANGES), query=f.query(), poll=POLL_SECONDS, paged=bool(before),
                        next_query=f.query(before=next_before) if next_before else None,
                        stuck_minutes=int(op_overview.STUCK_AFTER.total_seconds() // 60))


@get("/operations/rows")
async def operations_rows(console: Console, state: State, *,
                          state_: str | None = _P["state_"], kind: str | None = _P["kind"],
                          client_id: str | None = _P["client_id"], account: str | None = _P["account"],
                          range_: str | None = _P["range_"], since: str | None = _P["since"],
                          until: str | None = _P["until"], stuck: bool = Parameter(default=False)) -> Template:
    """The list's rows only: what the page's htmx poll swaps in (the newest page)."""
    f = _filters(state=state_, kind=kind, client_id=client_id, account=account, range_=range_, since=since,
                 until=until, stuck=stuck)
    rows, _ = await _list(state, console, f, None)
    return Template("_operation_rows.html", context={"rows": rows})


# ---------------------------------------------------------------- one operation


async def _operation(console: Console, state: State, operation_id: str) -> ledger.Operation:
    async with ctx_of(state).pool.acquire() as conn:
        op = await ledger.get_operation(conn, console.tenant.id, operation_id)
    if op is None:
        raise NotFound("operation_not_found", "No such operation.")
    return op


async def _delivery(conn: Any, tenant_id: str, op: ledger.Operation) -> dict[str, Any]:
    """The perform message of ``op`` (if any) with its attempts and endpoint."""
    if op.perform_message_id is None:
        return {"message": None, "attempts": [], "endpoint": None}
    try:
        message = await wh_messages.get_message(conn, tenant_id, op.perform_message_id)
    except NotFound:  # pruned after the retention period
        return {"message": None, "attempts": [], "endpoint": None, "pruned": True}
    attempts = await wh_attempts.list_attempts(conn, tenant_id, message.id)
    try:
        endpoint = await wh.get_endpoint(conn, tenant_id, message.endpoint_id)
    except NotFound:
        endpoint = None
    return {"message": message, "attempts": attempts, "endpoint": endpoint}


def _live(op: ledger.Operation, delivery: dict[str, Any]) -> bool:
    """Whether the page should keep polling: the operation or its delivery may still change."""
    message = delivery.get("message")
    return op.state in ("proposed", "in_progress") or (message is not None and message.state == "pending")


@get("/operations/{operation_id:str}")
async def operation_detail(operation_id: FromPath[str], console: Console, state: State,
                           notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    ctx = ctx_of(state)
    op = await _operation(console, state, operation_id)
    async with ctx.pool.acquire() as conn:
        revs = await ledger.revisions(conn, console.tenant.id, op.id)
        delivery = await _delivery(conn, console.tenant.id, op)
    changes = op_overview.revision_changes(revs)
    return console.page("operation.html", nav="operations", op=op, stuck=op_overview.is_stuck(op, ctx.now()),
                        changes=list(reversed(changes)), terms_json=_json(op.terms), input_json=_json(op.input),
                        result_json=_json(op.result), json_of=_json, poll=DETAIL_POLL_SECONDS, live=_live(op, delivery),
                        notice=_NOTICES.get(notice or ""), **delivery)


@get("/operations/{operation_id:str}/delivery")
async def operation_delivery(operation_id: FromPath[str], console: Console, state: State) -> Template:
    """The operation's state and perform attempts only: what the page's htmx poll swaps in."""
    ctx = ctx_of(state)
    op = await _operation(console, state, operation_id)
    async with ctx.pool.acquire() as conn:
        delivery = await _delivery(conn, console.tenant.id, op)
    return Template("_operation_delivery.html", context={
        "op": op, "stuck": op_overview.is_stuck(op, ctx.now()), "can_write": console.can_write,
        "poll": DETAIL_POLL_SECONDS, "live": _live(op, delivery), "result_json": _json(op.result), **delivery})


def _json(value: Any) -> str | None:
    """Pretty JSON text (the template escapes it)."""
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _redeliver_confirm(console: Console, op: ledger.Operation) -> Template:
    return confirm_page(console, nav="operations", title="Send the perform webhook again?",
                        message="Frontdoor sends the same message again now (same webhook-id and idempotency key, a "
                                "fresh retry schedule). A receiver that already performed it must answer with the "
                                "same outcome without performing twice.",
                        subject=f"{op.id} · {op.perform_message_id}", action=f"/operations/{op.id}/redeliver",
                        button="Redeliver", cancel=f"/operations/{op.id}", danger=False)


async def _redeliverable(console: Console, state: State, operation_id: str) -> ledger.Operation:
    op = await _operation(console, state, operation_id)
    if op.perform_message_id is None:
        raise NotFound("no_perform_message", "This operation has no perform webhook to send (not confirmed).")
    if op.state != "in_progress":  # final: performing it again could act twice (OPS-6-02)
        raise Conflict("webhook_message_superseded",
                       "This operation is final: its perform webhook is never sent again.")
    return op


@get("/operations/{operation_id:str}/redeliver")
async def operation_redeliver_confirm(operation_id: FromPath[str], console: Console, state: State) -> Template:
    return _redeliver_confirm(console, await _redeliverable(console, state, operation_id))


@post("/operations/{operation_id:str}/redeliver")
async def operation_redeliver(operation_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                              state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    op = await _redeliverable(console, state, operation_id)
    if data.confirm != "yes":
        return _redeliver_confirm(console, op)
    assert op.perform_message_id is not None
    async with transaction(ctx.pool) as conn:
        await wh_messages.redeliver(conn, console.actor, op.perform_message_id, now=ctx.now())
    return Redirect(f"/operations/{op.id}?notice=redelivered", status_code=303)


# ---------------------------------------------------------------- operation kinds


async def _kinds_page(console: Console, state: State, *, status_code: int = 200, **context: Any) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        kinds = await op_kinds.list_kinds(conn, console.tenant.id)
        endpoints = await wh.list_endpoints(conn, console.tenant.id)
        used = await op_overview.kinds_in_use(conn, console.tenant.id)
    return console.page("operation_kinds.html", nav="operation_kinds", kinds=kinds, used=used,
                        endpoints={e.id: e for e in endpoints}, status_code=status_code,
                        **{"error": None, "errors": {}, "form": None, "editing": None, "notice": None, **context})


@get("/operation-kinds")
async def kinds_page(console: Console, state: State,
                     notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _kinds_page(console, state, notice=_NOTICES.get(notice or ""))


@get("/operation-kinds/{name:str}")
async def kind_edit_page(name: FromPath[str], console: Console, state: State) -> Template:
    kind = await _kind(console, state, name)
    return await _kinds_page(console, state, editing=kind.name, form=_form_of(kind))


async def _kind(console: Console, state: State, name: str) -> op_kinds.Kind:
    async with ctx_of(state).pool.acquire() as conn:
        kind = await op_kinds.get_kind(conn, console.tenant.id, name[:64])
    if kind is None:
        raise NotFound("kind_not_found", "No such operation kind.")
    return kind


def _form_of(kind: op_kinds.Kind) -> dict[str, str]:
    return {"name": kind.name, "description": kind.description, "scopes": " ".join(kind.scopes),
            "default_expiry_seconds": str(kind.default_expiry_seconds),
            "max_expiry_seconds": str(kind.max_expiry_seconds), "perform_endpoint_id": kind.perform_endpoint_id,
            "reprice_endpoint_id": kind.reprice_endpoint_id or ""}


_KIND_FIELDS = ("name", "description", "scopes", "default_expiry_seconds", "max_expiry_seconds",
                "perform_endpoint_id", "reprice_endpoint_id")


async def _kind_form(request: Request[Any, Any, Any]) -> dict[str, str]:
    raw = await request.form()
    form: dict[str, str] = {}
    for key, value in list(raw.multi_items())[:_MAX_FORM_VALUES]:
        if key in _KIND_FIELDS and isinstance(value, str):
            form[key] = value.strip()[:2000]
    return form


def _kind_input(form: dict[str, str]) -> op_kinds.KindInput:
    errors: dict[str, str] = {}

    def seconds(field: str) -> int:
        raw = form.get(field, "")
        if not raw.isdigit() or len(raw) > 9:
            errors[field] = "a whole number of seconds"
            return 0
        return int(raw)

    default, maximum = seconds("default_expiry_seconds"), seconds("max_expiry_seconds")
    if not form.get("perform_endpoint_id"):
        errors["perform_endpoint_id"] = "choose the endpoint that performs it"
    if errors:
        raise Invalid("invalid_kind", "Some fields need a fix.", fields=errors)
    return op_kinds.KindInput(perform_endpoint_id=form["perform_endpoint_id"],
                              description=form.get("description", ""), scopes=form.get("scopes", "").split(),
                              default_expiry_seconds=default, max_expiry_seconds=maximum,
                              reprice_endpoint_id=form.get("reprice_endpoint_id") or None)


async def _save_kind(console: Console, state: State, name: str, form: dict[str, str], *,
                     editing: str | None) -> Response[Any]:
    ctx = ctx_of(state)
    try:
        data = _kind_input(form)
        async with ctx.pool.acquire() as conn:
            await op_kinds.put_kind(conn, console.actor, name, data, now=ctx.now())
    except Invalid as exc:
        return await _kinds_page(console, state, error=exc.detail, errors=exc.fields or {}, form=form,
                                 editing=editing, status_code=422)
    return Redirect("/operation-kinds?notice=kind_saved", status_code=303)


@post("/operation-kinds")
async def kind_create(console: Console, state: State, request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    form = await _kind_form(request)
    name = form.get("name", "")
    async with ctx_of(state).pool.acquire() as conn:
        exists = await op_kinds.get_kind(conn, console.tenant.id, name[:64]) is not None
    if exists:
        return await _kinds_page(console, state, error="A kind with this name exists: edit it instead.",
                                 errors={"name": "already exists"}, form=form, status_code=409)
    return await _save_kind(console, state, name, form, editing=None)


@post("/operation-kinds/{name:str}")
async def kind_update(name: FromPath[str], console: Console, state: State,
                      request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    kind = await _kind(console, state, name)
    form = {**await _kind_form(request), "name": kind.name}
    return await _save_kind(console, state, kind.name, form, editing=kind.name)


def _kind_delete_confirm(console: Console, kind: op_kinds.Kind) -> Template:
    return confirm_page(console, nav="operation_kinds", title="Delete this operation kind?",
                        message="Your servers can no longer propose operations of this kind. Only a kind no "
                                "operation uses can be deleted.",
                        subject=kind.name, action=f"/operation-kinds/{kind.name}/delete", button="Delete kind",
                        cancel="/operation-kinds")


@get("/operation-kinds/{name:str}/delete")
async def kind_delete_confirm(name: FromPath[str], console: Console, state: State) -> Template:
    return _kind_delete_confirm(console, await _kind(console, state, name))


@post("/operation-kinds/{name:str}/delete")
async def kind_delete(name: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                      state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    kind = await _kind(console, state, name)
    if data.confirm != "yes":
        return _kind_delete_confirm(console, kind)
    try:
        async with ctx.pool.acquire() as conn:
            await op_kinds.delete_kind(conn, console.actor, kind.name, now=ctx.now())
    except Conflict as exc:
        return await _kinds_page(console, state, error=exc.detail, status_code=409)
    return Redirect("/operation-kinds?notice=kind_deleted", status_code=303)


routes: list[Any] = [operations_page, operations_rows, operation_detail, operation_delivery,
                     operation_redeliver_confirm, operation_redeliver, kinds_page, kind_edit_page, kind_create,
                     kind_update, kind_delete_confirm, kind_delete]
