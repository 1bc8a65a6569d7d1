"""Dashboard pages for webhook endpoints and their messages.

``/webhooks``: the endpoints (URL, subscriptions, enabled or why not, failing since) and
the form to add one; its ``whsec_`` secret is on that one response only. An endpoint's
page edits its URL, description and subscriptions, rotates the secret (the old one keeps
signing for the overlap chosen; the new one is shown once), disables and re-enables,
deletes (refused while an operation kind uses it), sends a test event, recovers failed
messages since a time (a background job), and lists its messages, refreshed through htmx
polling. A message's page shows its body and every attempt, and **Redeliver…** it.

Destructive actions ask first; the webhooks library writes the audit rows.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

import asyncpg
import msgspec
from frontdoor_conversations import publish_changed, relay_endpoints
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_operations import kinds as op_kinds
from frontdoor_webhooks import attempts as wh_attempts
from frontdoor_webhooks import endpoints as wh
from frontdoor_webhooks import messages as wh_messages
from frontdoor_webhooks import recoveries as wh_recoveries
from frontdoor_webhooks.event_types import EVENT_TYPES
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from . import billing_pages
from .deps import ctx_of, tenant_quota
from .operation_pages import parse_time
from .page import FORM, Console, confirm_page

__all__ = ["routes"]

POLL_SECONDS = 5
_MESSAGES = 50
_MAX_FORM_VALUES = 100
_NOTICES = {
    "saved": "Endpoint saved.",
    "enabled": "Endpoint enabled: its waiting messages are sent now.",
    "disabled": "Endpoint disabled: its messages wait until you enable it again.",
    "deleted": "Endpoint deleted, with its messages and attempts.",
    "test_sent": "Test event queued: it appears under Messages below.",
    "redelivered": "Message queued again (same webhook-id): the next attempt is due now.",
    "recovery_queued": "Recovery queued: the failed messages since that time are sent again in the background.",
}
# The secret overlap choices of a rotation: label, duration (None: the configured default).
_OVERLAPS: dict[str, timedelta | None] = {"default": None, "0": timedelta(0), "1h": timedelta(hours=1),
                                          "24h": timedelta(hours=24), "7d": timedelta(days=7)}


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


class RotateForm(msgspec.Struct, frozen=True, kw_only=True):
    overlap: str = "default"
    confirm: str = ""


class RecoverForm(msgspec.Struct, frozen=True, kw_only=True):
    since: str = ""
    confirm: str = ""


async def _form(request: Request[Any, Any, Any]) -> dict[str, list[str]]:
    raw = await request.form()
    form: dict[str, list[str]] = {}
    for key, value in list(raw.multi_items())[:_MAX_FORM_VALUES]:
        if isinstance(value, str):
            form.setdefault(key, []).append(value)
    return form


def _one(form: dict[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0].strip()


# ---------------------------------------------------------------- endpoints


async def _list_page(console: Console, state: State, *, status_code: int = 200, **context: Any) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        endpoints = await wh.list_endpoints(conn, console.tenant.id)
    return console.page("webhooks.html", nav="webhooks", endpoints=endpoints, event_types=EVENT_TYPES,
                        status_code=status_code, **{"error": None, "errors": {}, "form": {}, "notice": None, **context})


@get("/webhooks")
async def webhooks_page(console: Console, state: State,
                        notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _list_page(console, state, notice=_NOTICES.get(notice or ""))


@post("/webhooks")
async def webhooks_create(console: Console, state: State, request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    form = await _form(request)
    wanted: dict[str, Any] = {"url": _one(form, "url")[:2048], "description": _one(form, "description")[:500],
              "event_types": form.get("event_types", [])}
    try:
        async with transaction(ctx.pool) as conn:
            await billing_pages.require_room(state, conn, console.tenant.id, "webhook_endpoints")
            created = await wh.create_endpoint(conn, console.actor, url=wanted["url"], kek=ctx.kek, now=ctx.now(),
                                               description=wanted["description"],
                                               event_types=wanted["event_types"],
                                               max_endpoints=ctx.settings.webhook_endpoint_limit,
                                               allow_insecure=ctx.settings.is_dev,
                                               allowlist=ctx.settings.webhook_allowlist_entries())
    except Invalid as exc:
        return await _list_page(console, state, error=exc.detail, errors=exc.fields or {}, form=wanted,
                                status_code=422)
    # The only response that ever carries this secret: never cached (router), never rendered again.
    return await _detail(console, state, created.endpoint.id, new_secret=created.secret, created=True,
                         status_code=201)


async def _endpoint(console: Console, state: State, endpoint_id: str) -> wh.Endpoint:
    async with ctx_of(state).pool.acquire() as conn:
        return await wh.get_endpoint(conn, console.tenant.id, endpoint_id[:100])


async def _detail(console: Console, state: State, endpoint_id: str, *, status_code: int = 200,
                  recovery_id: str | None = None, **context: Any) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        endpoint = await wh.get_endpoint(conn, console.tenant.id, endpoint_id[:100])
        messages = await wh_messages.list_messages(conn, console.tenant.id, endpoint_id=endpoint.id, limit=_MESSAGES)
        kinds = [k for k in await op_kinds.list_kinds(conn, console.tenant.id)
                 if endpoint.id in (k.perform_endpoint_id, k.reprice_endpoint_id)]
        recovery = None
        if recovery_id:
            try:
                recovery = await wh_recoveries.get_recovery(conn, console.tenant.id, recovery_id[:100])
            except NotFound:
                recovery = None
    return console.page("webhook.html", nav="webhooks", e=endpoint, messages=messages, kinds=kinds,
                        event_types=EVENT_TYPES, overlaps=list(_OVERLAPS), poll=POLL_SECONDS, recovery=recovery,
                        status_code=status_code,
                        **{"error": None, "errors": {}, "form": None, "new_secret": None, "created": False,
                           "notice": None, **context})


@get("/webhooks/{endpoint_id:str}")
async def webhook_detail(endpoint_id: FromPath[str], console: Console, state: State,
                         notice: str | None = Parameter(default=None, max_length=40),
                         recovery: str | None = Parameter(default=None, max_length=100)) -> Template:
    return await _detail(console, state, endpoint_id, notice=_NOTICES.get(notice or ""), recovery_id=recovery)


@get("/webhooks/{endpoint_id:str}/messages")
async def webhook_messages_rows(endpoint_id: FromPath[str], console: Console, state: State) -> Template:
    """The endpoint's messages only: what the page's htmx poll swaps in."""
    async with ctx_of(state).pool.acquire() as conn:
        endpoint = await wh.get_endpoint(conn, console.tenant.id, endpoint_id[:100])
        messages = await wh_messages.list_messages(conn, console.tenant.id, endpoint_id=endpoint.id, limit=_MESSAGES)
    return Template("_webhook_messages.html", context={"messages": messages, "can_write": console.can_write})


@post("/webhooks/{endpoint_id:str}")
async def webhook_update(endpoint_id: FromPath[str], console: Console, state: State,
                         request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    endpoint = await _endpoint(console, state, endpoint_id)
    form = await _form(request)
    wanted: dict[str, Any] = {"url": _one(form, "url")[:2048], "description": _one(form, "description")[:500],
              "event_types": form.get("event_types", [])}
    try:
        async with transaction(ctx.pool) as conn:
            await wh.update_endpoint(conn, console.actor, endpoint.id, now=ctx.now(), url=wanted["url"],
                                     description=wanted["description"], event_types=wanted["event_types"],
                                     allow_insecure=ctx.settings.is_dev,
                                     allowlist=ctx.settings.webhook_allowlist_entries())
    except Invalid as exc:
        return await _detail(console, state, endpoint.id, error=exc.detail, errors=exc.fields or {}, form=wanted,
                             status_code=422)
    return Redirect(f"/webhooks/{endpoint.id}?notice=saved", status_code=303)


# --- rotate -------------------------------------------------------------------------------


def _overlap_label(key: str, default: timedelta) -> str:
    value = _OVERLAPS.get(key) or default
    hours = int(value.total_seconds() // 3600)
    if not value:
        return "no time at all"
    if hours >= 48:
        return f"{hours // 24} days"
    return "1 hour" if hours == 1 else f"{hours} hours"


def _rotate_confirm(console: Console, state: State, e: wh.Endpoint, overlap: str) -> Template:
    label = _overlap_label(overlap, ctx_of(state).settings.webhook_secret_overlap)
    return confirm_page(console, nav="webhooks", title="Rotate this endpoint's signing secret?",
                        message=f"A new whsec_ secret is made and shown once. Deliveries are signed with both the "
                                f"new and the current secret for {label}, then with the new one only: update your "
                                f"receiver within that time.",
                        subject=e.url, action=f"/webhooks/{e.id}/rotate", button="Rotate secret",
                        cancel=f"/webhooks/{e.id}", fields={"overlap": overlap})


@get("/webhooks/{endpoint_id:str}/rotate")
async def webhook_rotate_confirm(endpoint_id: FromPath[str], console: Console, state: State,
                                 overlap: str = Parameter(default="default", max_length=10)) -> Template:
    return _rotate_confirm(console, state, await _endpoint(console, state, endpoint_id),
                           overlap if overlap in _OVERLAPS else "default")


@post("/webhooks/{endpoint_id:str}/rotate")
async def webhook_rotate(endpoint_id: FromPath[str], data: Annotated[RotateForm, FORM], console: Console,
                         state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    e = await _endpoint(console, state, endpoint_id)
    overlap_key = data.overlap if data.overlap in _OVERLAPS else "default"
    if data.confirm != "yes":
        return _rotate_confirm(console, state, e, overlap_key)
    overlap = _OVERLAPS[overlap_key]
    async with transaction(ctx.pool) as conn:
        secret = await wh.rotate_secret(conn, console.actor, e.id, kek=ctx.kek, now=ctx.now(),
                                        overlap=ctx.settings.webhook_secret_overlap if overlap is None else overlap)
    # The only response that ever carries the new secret.
    return await _detail(console, state, e.id, new_secret=secret,
                         notice=f"Secret rotated; the previous one keeps signing for "
                                f"{_overlap_label(overlap_key, ctx.settings.webhook_secret_overlap)}.")


# --- enable / disable / delete --------------------------------------------------------------

_ACTIONS = {
    "disable": ("Disable this endpoint?", "Nothing is sent to it until you enable it again; its messages wait "
                "(perform webhooks of confirmed operations too, which then stay in progress).", "Disable endpoint",
                True),
    "enable": ("Enable this endpoint?", "Its waiting messages are sent now, and its failure streak restarts.",
               "Enable endpoint", False),
    "delete": ("Delete this endpoint?", "It is removed with its secrets, messages and attempts. This cannot be "
               "undone. An endpoint an operation kind uses cannot be deleted.", "Delete endpoint", True),
}


_IN_USE = ("Operation kinds use this endpoint, so it cannot be deleted: point them at another endpoint, delete "
           "them, or disable this endpoint instead.")


def _action_confirm(console: Console, e: wh.Endpoint, action: str) -> Template:
    title, message, button, danger = _ACTIONS[action]
    return confirm_page(console, nav="webhooks", title=title, message=message, subject=e.url,
                        action=f"/webhooks/{e.id}/{action}", button=button, cancel=f"/webhooks/{e.id}",
                        danger=danger)


async def _act(console: Console, state: State, endpoint_id: str, action: str, confirm: str) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    e = await _endpoint(console, state, endpoint_id)
    if confirm != "yes":
        return _action_confirm(console, e, action)
    if action == "delete":
        async with ctx.pool.acquire() as conn:
            in_use = any(e.id in (k.perform_endpoint_id, k.reprice_endpoint_id)
                         for k in await op_kinds.list_kinds(conn, console.tenant.id))
        if in_use:
            return await _detail(console, state, e.id, error=_IN_USE, status_code=409)
    changed: list[str] = []
    try:
        async with transaction(ctx.pool) as conn:  # disabled or deleted: its pending relays go to a person
            if action == "enable":
                await wh.enable_endpoint(conn, console.actor, e.id, now=ctx.now())
            elif action == "disable":
                _, changed = await relay_endpoints.disable_endpoint(conn, console.actor, e.id, reason="manual",
                                                                    now=ctx.now())
            else:
                changed = await relay_endpoints.delete_endpoint(conn, console.actor, e.id, now=ctx.now())
    except (Conflict, asyncpg.RestrictViolationError):  # a kind started using it meanwhile
        return await _detail(console, state, e.id, error=_IN_USE, status_code=409)
    for cid in changed:
        await publish_changed(ctx.redis, console.tenant.id, cid)
    if action == "delete":
        return Redirect("/webhooks?notice=deleted", status_code=303)
    return Redirect(f"/webhooks/{e.id}?notice={action}d", status_code=303)


@get("/webhooks/{endpoint_id:str}/disable")
async def webhook_disable_confirm(endpoint_id: FromPath[str], console: Console, state: State) -> Template:
    return _action_confirm(console, await _endpoint(console, state, endpoint_id), "disable")


@post("/webhooks/{endpoint_id:str}/disable")
async def webhook_disable(endpoint_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                          state: State) -> Response[Any]:
    return await _act(console, state, endpoint_id, "disable", data.confirm)


@get("/webhooks/{endpoint_id:str}/enable")
async def webhook_enable_confirm(endpoint_id: FromPath[str], console: Console, state: State) -> Template:
    return _action_confirm(console, await _endpoint(console, state, endpoint_id), "enable")


@post("/webhooks/{endpoint_id:str}/enable")
async def webhook_enable(endpoint_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                         state: State) -> Response[Any]:
    return await _act(console, state, endpoint_id, "enable", data.confirm)


@get("/webhooks/{endpoint_id:str}/delete")
async def webhook_delete_confirm(endpoint_id: FromPath[str], console: Console, state: State) -> Template:
    return _action_confirm(console, await _endpoint(console, state, endpoint_id), "delete")


@post("/webhooks/{endpoint_id:str}/delete")
async def webhook_delete(endpoint_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                         state: State) -> Response[Any]:
    return await _act(console, state, endpoint_id, "delete", data.confirm)


# --- test event, recovery -------------------------------------------------------------------


@post("/webhooks/{endpoint_id:str}/test")
async def webhook_test(endpoint_id: FromPath[str], console: Console, state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    e = await _endpoint(console, state, endpoint_id)
    await tenant_quota(ctx, console.tenant.id, "webhook_test")
    async with transaction(ctx.pool) as conn:
        await wh_messages.send_test(conn, console.actor, e.id, now=ctx.now())
    return Redirect(f"/webhooks/{e.id}?notice=test_sent", status_code=303)


def _recover_confirm(console: Console, e: wh.Endpoint, since: str) -> Template:
    return confirm_page(console, nav="webhooks", title="Send the failed messages again?",
                        message=f"Every message to this endpoint created since {since} (UTC) that ran out of retries "
                                f"or was aborted is queued again, keeping its webhook-id, in the background.",
                        subject=e.url, action=f"/webhooks/{e.id}/recover", button="Recover messages",
                        cancel=f"/webhooks/{e.id}", danger=False, fields={"since": since})


@get("/webhooks/{endpoint_id:str}/recover")
async def webhook_recover_confirm(endpoint_id: FromPath[str], console: Console, state: State,
                                  since: str = Parameter(default="", max_length=40)) -> Template:
    e = await _endpoint(console, state, endpoint_id)
    moment = parse_time(since, "since")
    if moment is None:
        raise Invalid("invalid_since", "Say since when: a date and time like 2026-11-30T10:00 (UTC).")
    return _recover_confirm(console, e, moment.strftime("%Y-%m-%dT%H:%M"))


@post("/webhooks/{endpoint_id:str}/recover")
async def webhook_recover(endpoint_id: FromPath[str], data: Annotated[RecoverForm, FORM], console: Console,
                          state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    e = await _endpoint(console, state, endpoint_id)
    moment = parse_time(data.since[:40], "since")
    if moment is None:
        raise Invalid("invalid_since", "Say since when: a date and time like 2026-11-30T10:00 (UTC).")
    if data.confirm != "yes":
        return _recover_confirm(console, e, moment.strftime("%Y-%m-%dT%H:%M"))
    await tenant_quota(ctx, console.tenant.id, "webhook_recovery")
    async with transaction(ctx.pool) as conn:
        job = await wh_recoveries.start_recovery(conn, console.actor, e.id, since=moment, now=ctx.now())
    return Redirect(f"/webhooks/{e.id}?" + urlencode({"notice": "recovery_queued", "recovery": job.id}),
                    status_code=303)


# ---------------------------------------------------------------- messages


async def _message(console: Console, state: State, message_id: str) -> wh_messages.Message:
    async with ctx_of(state).pool.acquire() as conn:
        return await wh_messages.get_message(conn, console.tenant.id, message_id[:100])


def _pretty(body: str) -> str:
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        return body


@get("/webhooks/messages/{message_id:str}")
async def message_detail(message_id: FromPath[str], console: Console, state: State,
                         notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        m = await wh_messages.get_message(conn, console.tenant.id, message_id[:100])
        attempts = await wh_attempts.list_attempts(conn, console.tenant.id, m.id)
        endpoint = await wh.get_endpoint(conn, console.tenant.id, m.endpoint_id)
    return console.page("webhook_message.html", nav="webhooks", m=m, attempts=attempts, endpoint=endpoint,
                        body=_pretty(m.body), poll=POLL_SECONDS, notice=_NOTICES.get(notice or ""))


@get("/webhooks/messages/{message_id:str}/attempts")
async def message_attempts(message_id: FromPath[str], console: Console, state: State) -> Template:
    """The message's state and attempts only: what the page's htmx poll swaps in."""
    async with ctx_of(state).pool.acquire() as conn:
        m = await wh_messages.get_message(conn, console.tenant.id, message_id[:100])
        attempts = await wh_attempts.list_attempts(conn, console.tenant.id, m.id)
    return Template("_message_attempts.html", context={"m": m, "attempts": attempts, "poll": POLL_SECONDS,
                                                       "can_write": console.can_write})


def _message_redeliver_confirm(console: Console, m: wh_messages.Message) -> Template:
    return confirm_page(console, nav="webhooks", title="Send this message again?",
                        message="The same body is sent again now under the same webhook-id, with a fresh retry "
                                "schedule, whatever its state.",
                        subject=f"{m.id} · {m.event_type}", action=f"/webhooks/messages/{m.id}/redeliver",
                        button="Redeliver", cancel=f"/webhooks/messages/{m.id}", danger=False)


async def _resendable(console: Console, state: State, message_id: str) -> wh_messages.Message:
    m = await _message(console, state, message_id)
    if not m.resendable:  # the page offers no button; a stale or typed URL is refused the same way
        raise Conflict("webhook_message_superseded",
                       "This perform message's operation is final: it is never sent again.")
    return m


@get("/webhooks/messages/{message_id:str}/redeliver")
async def message_redeliver_confirm(message_id: FromPath[str], console: Console, state: State) -> Template:
    return _message_redeliver_confirm(console, await _resendable(console, state, message_id))


@post("/webhooks/messages/{message_id:str}/redeliver")
async def message_redeliver(message_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                            state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    m = await _resendable(console, state, message_id)
    if data.confirm != "yes":
        return _message_redeliver_confirm(console, m)
    await tenant_quota(ctx, console.tenant.id, "webhook_redelivery")
    async with transaction(ctx.pool) as conn:
        await wh_messages.redeliver(conn, console.actor, m.id, now=ctx.now())
    return Redirect(f"/webhooks/messages/{m.id}?notice=redelivered", status_code=303)


routes: list[Any] = [webhooks_page, webhooks_create, webhook_detail, webhook_messages_rows, webhook_update,
                     webhook_rotate_confirm, webhook_rotate, webhook_disable_confirm, webhook_disable,
                     webhook_enable_confirm, webhook_enable, webhook_delete_confirm, webhook_delete, webhook_test,
                     webhook_recover_confirm, webhook_recover, message_detail, message_attempts,
                     message_redeliver_confirm, message_redeliver]
