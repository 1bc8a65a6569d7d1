"""The hosted conversations settings page (PAP §7, #16): ``/settings/conversations``.

What ``PUT /api/v1/issuer`` sets under ``conversations``, as a form: hosted conversations on
or off, how the company's agent answers (the webhook mode: ``conversation.message.created``
events and the ledger API; or the relay mode: Frontdoor POSTs each agent message to one of
the tenant's own webhook endpoints, chosen from a list of them), and the retention. Saving
goes through the same validation as the API (`issuer_settings.validate_settings`, then
`check_relay_endpoint`: an endpoint ID that is not this organisation's, or whose URL the
webhook rules refuse now, is refused under ``conversations.relay_endpoint_id``),
compare-and-set on the version the form was rendered from, and is audited
(``issuer.settings_updated``, ``section: conversations``). Viewers see the form disabled
and cannot post it (the app-wide guard, and `Console.require`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_conversations.relay import check_relay_endpoint
from frontdoor_conversations.rules import MAX_MESSAGE_BYTES, MAX_WAIT_SECONDS
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid
from frontdoor_tenancy import audit, issuer_settings
from frontdoor_tenancy.issuer_settings import HostedConversations, IssuerSettings
from frontdoor_webhooks.endpoints import Endpoint, list_endpoints
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import Parameter
from litestar.response import Redirect, Template

from .deps import ctx_of
from .page import Console

__all__ = ["routes", "settings_from_form"]

_NOTICES = {"saved": "Conversations settings saved. poppy.json and every ledger process follow within seconds."}
_MAX_FORM_VALUES = 20
_MAX_ENDPOINTS = 500
_RELAY = "conversations.relay_endpoint_id"


def _text(form: dict[str, list[str]], name: str) -> str:
    return (form.get(name) or [""])[0].strip()


def settings_from_form(current: IssuerSettings, form: dict[str, list[str]]) -> IssuerSettings:
    """The settings with ``conversations`` as the form describes it (nothing else changes).

    Raises:
        Invalid: ``invalid_settings`` for what the form itself gets wrong (a retention that is
            not a number, the relay mode without an endpoint, an unknown mode).
    """
    errors: dict[str, str] = {}
    raw_days = _text(form, "retention_days")
    days = int(raw_days) if raw_days.isdigit() and len(raw_days) <= 9 else 0
    if not days:
        errors["conversations.retention_days"] = "must be a whole number of days between 1 and 3650"
    mode = _text(form, "mode")
    endpoint_id: str | None = None
    if mode == "relay":
        endpoint_id = _text(form, "relay_endpoint_id")[:64] or None
        if endpoint_id is None:
            errors[_RELAY] = "choose one of your webhook endpoints to relay to"
    elif mode != "webhook":
        errors["conversations.mode"] = "choose webhook events or the relay"
    if errors:
        raise Invalid("invalid_settings", "The conversations settings are not valid.", fields=errors)
    return msgspec.structs.replace(current, conversations=HostedConversations(
        enabled="enabled" in form, retention_days=days, relay_endpoint_id=endpoint_id))


async def _page(console: Console, state: State, *, shown: HostedConversations | None = None,
                mode: str | None = None, retention: str | None = None, version: int | None = None,
                errors: dict[str, str] | None = None,
                error: str | None = None, notice: str | None = None, status_code: int = 200) -> Template:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        stored = await issuer_settings.get_settings(conn, console.tenant.id)
        endpoints: list[Endpoint] = await list_endpoints(conn, console.tenant.id, limit=_MAX_ENDPOINTS)
    settings = shown or stored.settings.conversations
    chosen = settings.relay_endpoint_id
    return console.page(
        "conversation_settings.html", nav="settings", c=settings, mode=mode or ("relay" if chosen else "webhook"),
        retention=retention if retention is not None else str(settings.retention_days),
        version=version or stored.version, updated_at=stored.updated_at, endpoints=endpoints,
        missing=chosen is not None and all(e.id != chosen for e in endpoints),
        own_endpoint=stored.settings.conversation_endpoint, subscribed=[
            e for e in endpoints if "conversation.message.created" in e.event_types],
        ledger=f"{ctx.settings.ledger_base_url}/{console.tenant.slug}/conversations",
        max_message_bytes=MAX_MESSAGE_BYTES, max_wait=MAX_WAIT_SECONDS,
        errors=errors or {}, error=error, notice=notice, status_code=status_code)


@get("/settings/conversations")
async def conversation_settings_page(console: Console, state: State,
                                     notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _page(console, state, notice=_NOTICES.get(notice or ""))


@post("/settings/conversations")
async def conversation_settings_save(console: Console, state: State,
                                     request: Request[Any, Any, Any]) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    form: dict[str, list[str]] = {}
    for key, value in list((await request.form()).multi_items())[:_MAX_FORM_VALUES]:
        if isinstance(value, str):
            form.setdefault(key, []).append(value)
    version_text = _text(form, "version")
    version = int(version_text) if version_text.isdigit() and len(version_text) < 10 else None
    mode = _text(form, "mode")
    async with ctx.pool.acquire() as conn:
        current = (await issuer_settings.get_settings(conn, console.tenant.id)).settings
    try:
        wanted = settings_from_form(current, form)
    except Invalid as exc:
        endpoint_id = _text(form, "relay_endpoint_id")[:64] or None
        kept = HostedConversations(enabled="enabled" in form, retention_days=current.conversations.retention_days,
                                   relay_endpoint_id=endpoint_id if mode == "relay" else None)
        return await _page(console, state, shown=kept, mode=mode, retention=_text(form, "retention_days")[:12],
                           version=version, errors=exc.fields, error=exc.detail, status_code=422)
    try:
        clean = issuer_settings.validate_settings(wanted, dev=ctx.settings.is_dev)
        async with transaction(ctx.pool) as conn:
            # This organisation's endpoint only (another's is unknown), at a URL the webhook rules accept now.
            await check_relay_endpoint(conn, console.tenant.id, clean.conversations.relay_endpoint_id,
                                       allow_insecure=ctx.settings.is_dev,
                                       allowlist=ctx.settings.webhook_allowlist_entries())
            stored = await issuer_settings.update_settings(conn, console.tenant.id, clean, if_version=version)
            c = clean.conversations
            await audit.record(conn, console.actor, "issuer.settings_updated", target_type="tenant",
                               target_id=console.tenant.id, details={
                                   "version": stored.version, "via": "dashboard", "section": "conversations",
                                   "conversations": {"enabled": c.enabled, "retention_days": c.retention_days,
                                                     "relay_endpoint_id": c.relay_endpoint_id}})
    except Invalid as exc:
        return await _page(console, state, shown=wanted.conversations, mode=mode, version=version,
                           errors=exc.fields, error=exc.detail, status_code=422)
    except Conflict as exc:
        return await _page(console, state, error=exc.detail, status_code=409)
    return Redirect("/settings/conversations?notice=saved", status_code=303)


routes: list[Any] = [conversation_settings_page, conversation_settings_save]
