"""The human handoff inbox: hosted conversations answered by the company's people (#16).

``/conversations``: the views (waiting for a person, with a person, assigned to me, open,
closed); their rows come from ``/conversations/rows``, re-fetched when the page's
Server-Sent Events stream says the tenant's conversations changed (`.conversation_stream`),
or every 2 seconds where the browser has no EventSource or the stream is refused.
``/conversations/{id}``: the conversation and its transcript (``/conversations/{id}/live``,
re-fetched the same way), and the actions: take over (``responder: human``, named by the member's display name), reply,
hand back to the company's agent, close (confirmed first), assign to a team member.
``/conversations/display-name``: the name agents see when this member answers (never
their email). ``/sessions/{id}/conversations``: the transcripts of a Session's
conversations, loaded into the Session's page.

The use cases live in `frontdoor_conversations.inbox` (role checks, audit rows); after
each commit this module publishes the wake-up on Redis, so agents long-polling or
streaming at the ledger read the change at once, and so do the dashboard's own streams on
every console process. Viewers read only (the app-wide guard,
and `Console.require` here).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec
from frontdoor_conversations import inbox, publish_changed
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id
from frontdoor_sessions.session_directory import get_session
from frontdoor_tenancy import team
from frontdoor_tenancy.issuer_settings import get_settings
from frontdoor_webhooks.endpoints import get_endpoint
from litestar import Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from . import conversation_stream
from .deps import ctx_of
from .page import FORM, Console, confirm_page

__all__ = ["POLL_SECONDS", "routes"]

POLL_SECONDS = 2
_VIEW_LABELS = {"queue": "Waiting for a person", "human": "With a person", "mine": "Assigned to me",
                "open": "All open", "closed": "Closed"}
_NOTICES = {
    "taken_over": "You answer this conversation now: the agent sees responder human and your display name.",
    "handed_back": "Handed back: the company's agent answers again.",
    "replied": "Reply sent.",
    "closed": "Conversation closed.",
    "assigned": "Assignment saved.",
    "display_name_saved": "Display name saved.",
}


class ReplyForm(msgspec.Struct, frozen=True, kw_only=True):
    text: str = ""
    message_id: str = ""


class AssignForm(msgspec.Struct, frozen=True, kw_only=True):
    admin_id: str = ""


class NameForm(msgspec.Struct, frozen=True, kw_only=True):
    display_name: str = ""


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


def _view(raw: str | None) -> str:
    return raw if raw in _VIEW_LABELS else "queue"


async def _rows(console: Console, state: State, view: str) -> list[inbox.InboxItem]:
    async with ctx_of(state).pool.acquire() as conn:
        return await inbox.list_inbox(conn, console.tenant.id, view=view, admin_id=console.actor.id)


async def _enabled(conn: Any, tenant_id: str) -> bool:
    return bool((await get_settings(conn, tenant_id)).settings.conversations.enabled)


async def _relay_url(conn: Any, tenant_id: str) -> str | None:
    """The relay mode's endpoint URL ("" when the named endpoint is gone); None in the webhook mode."""
    endpoint_id = (await get_settings(conn, tenant_id)).settings.conversations.relay_endpoint_id
    if endpoint_id is None:
        return None
    try:
        return (await get_endpoint(conn, tenant_id, endpoint_id)).url
    except NotFound:
        return ""


@get("/conversations")
async def inbox_page(console: Console, state: State, view: str | None = Parameter(default=None, max_length=16),
                     notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    chosen = _view(view)
    rows = await _rows(console, state, chosen)
    async with ctx_of(state).pool.acquire() as conn:
        waiting = await inbox.queue_count(conn, console.tenant.id)
        enabled = await _enabled(conn, console.tenant.id)
        relay = await _relay_url(conn, console.tenant.id)
        name = await inbox.display_name(conn, console.tenant.id, console.actor.id or "")
    return console.page("conversations.html", nav="conversations", rows=rows, view=chosen, views=_VIEW_LABELS,
                        waiting=waiting, enabled=enabled, relay=relay, poll=POLL_SECONDS, display_name=name,
                        default_name=inbox.default_display_name(console.tenant.organization_name),
                        notice=_NOTICES.get(notice or ""), error=None)


@get("/conversations/rows")
async def inbox_rows(console: Console, state: State,
                     view: str | None = Parameter(default=None, max_length=16)) -> Template:
    """The list's rows only: what the page's htmx poll swaps in."""
    return Template("_conversation_rows.html", context={"rows": await _rows(console, state, _view(view))})


async def _detail_context(console: Console, state: State, conversation_id: str) -> dict[str, Any]:
    async with ctx_of(state).pool.acquire() as conn:
        conversation = await inbox.get(conn, console.tenant.id, conversation_id)
        kept = await inbox.transcript(conn, conversation)
        assigned = await inbox.assignment(conn, console.tenant.id, conversation.id)
    return {"c": conversation, "transcript": kept, "assigned": assigned, "poll": POLL_SECONDS,
            "can_write": console.can_write, "me": console.actor.id, "json_of": _json}


@get("/conversations/{conversation_id:str}")
async def conversation_page(conversation_id: FromPath[str], console: Console, state: State,
                            notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    context = await _detail_context(console, state, conversation_id)
    async with ctx_of(state).pool.acquire() as conn:
        members = [m for m in await team.list_members(conn, console.tenant.id) if m.role != "viewer"]
        name = await inbox.display_name(conn, console.tenant.id, console.actor.id or "")
    return console.page("conversation.html", nav="conversations", members=members, reply_id=new_id("msg"),
                        display_name=name or inbox.default_display_name(console.tenant.organization_name),
                        notice=_NOTICES.get(notice or ""), error=None, draft="", **context)


@get("/conversations/{conversation_id:str}/live")
async def conversation_live(conversation_id: FromPath[str], console: Console, state: State) -> Template:
    """The conversation's state and transcript only: what the page's htmx poll swaps in."""
    return Template("_conversation_live.html", context=await _detail_context(console, state, conversation_id))


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


async def _changed(state: State, tenant_id: str, *conversation_ids: str | None) -> None:
    """Wake the agents reading these conversations at the ledger and the dashboard's streams
    (this process's at once, every other process's through Redis)."""
    streams = conversation_stream.streams_of(state)
    for conversation_id in conversation_ids:
        if conversation_id is not None:
            streams.wake(tenant_id, conversation_id)
            await publish_changed(ctx_of(state).redis, tenant_id, conversation_id)


def _back(conversation_id: str, notice: str) -> Redirect:
    return Redirect(f"/conversations/{conversation_id}?notice={notice}", status_code=303)


@post("/conversations/{conversation_id:str}/take-over")
async def take_over(conversation_id: FromPath[str], console: Console, state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        conversation = await inbox.take_over(conn, console.actor, conversation_id,
                                             organization_name=console.tenant.organization_name, now=ctx.now())
    await _changed(state, console.tenant.id, conversation.id)
    return _back(conversation.id, "taken_over")


@post("/conversations/{conversation_id:str}/hand-back")
async def hand_back(conversation_id: FromPath[str], console: Console, state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        conversation = await inbox.hand_back(conn, console.actor, conversation_id, now=ctx.now())
    await _changed(state, console.tenant.id, conversation.id)
    return _back(conversation.id, "handed_back")


@post("/conversations/{conversation_id:str}/reply")
async def reply(conversation_id: FromPath[str], data: Annotated[ReplyForm, FORM], console: Console,
                state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    try:
        async with transaction(ctx.pool) as conn:
            conversation, _ = await inbox.reply(conn, console.actor, conversation_id, data.text,
                                                organization_name=console.tenant.organization_name, now=ctx.now(),
                                                message_id=data.message_id[:64] or None)
    except (Invalid, Conflict) as exc:
        context = await _detail_context(console, state, conversation_id)
        async with ctx.pool.acquire() as conn:
            members = [m for m in await team.list_members(conn, console.tenant.id) if m.role != "viewer"]
            name = await inbox.display_name(conn, console.tenant.id, console.actor.id or "")
        return console.page("conversation.html", nav="conversations", members=members, reply_id=new_id("msg"),
                            display_name=name or inbox.default_display_name(console.tenant.organization_name),
                            error=exc.detail, draft=data.text[:inbox.MAX_REPLY_CHARS],
                            status_code=409 if isinstance(exc, Conflict) else 422, **context)
    await _changed(state, console.tenant.id, conversation.id)
    return _back(conversation.id, "replied")


def _close_confirm(console: Console, conversation_id: str) -> Template:
    return confirm_page(console, nav="conversations", title="Close this conversation?",
                        message="The agent can no longer send messages to it (a Direct Conversation open under it "
                                "closes too). Its transcript stays readable until retention forgets it.",
                        subject=conversation_id, action=f"/conversations/{conversation_id}/close",
                        button="Close conversation", cancel=f"/conversations/{conversation_id}")


@get("/conversations/{conversation_id:str}/close")
async def close_confirm(conversation_id: FromPath[str], console: Console, state: State) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        conversation = await inbox.get(conn, console.tenant.id, conversation_id)
    return _close_confirm(console, conversation.id)


@post("/conversations/{conversation_id:str}/close")
async def close(conversation_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    if data.confirm != "yes":
        async with ctx.pool.acquire() as conn:
            found = await inbox.get(conn, console.tenant.id, conversation_id)
        return _close_confirm(console, found.id)
    async with transaction(ctx.pool) as conn:
        conversation = await inbox.close(conn, console.actor, conversation_id, now=ctx.now())
    await _changed(state, console.tenant.id, conversation.id, conversation.parent_id, conversation.direct_child_id)
    return _back(conversation.id, "closed")


@post("/conversations/{conversation_id:str}/assign")
async def assign(conversation_id: FromPath[str], data: Annotated[AssignForm, FORM], console: Console,
                 state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        await inbox.assign(conn, console.actor, conversation_id, data.admin_id[:64] or None, now=ctx.now())
    await _changed(state, console.tenant.id, conversation_id)  # other members' inbox shows the assignee
    return _back(conversation_id, "assigned")


@post("/conversations/display-name")
async def set_display_name(data: Annotated[NameForm, FORM], console: Console, state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    try:
        async with transaction(ctx.pool) as conn:
            await inbox.set_display_name(conn, console.actor, data.display_name[:200], now=ctx.now())
    except Invalid as exc:
        rows = await _rows(console, state, "queue")
        async with ctx.pool.acquire() as conn:
            waiting = await inbox.queue_count(conn, console.tenant.id)
            enabled = await _enabled(conn, console.tenant.id)
        return console.page("conversations.html", nav="conversations", rows=rows, view="queue",
                            views=_VIEW_LABELS, waiting=waiting, enabled=enabled, poll=POLL_SECONDS,
                            display_name=data.display_name[:60],
                            default_name=inbox.default_display_name(console.tenant.organization_name),
                            error=exc.detail, status_code=422)
    return Redirect("/conversations?notice=display_name_saved", status_code=303)


@get("/sessions/{session_id:str}/conversations")
async def session_conversations(session_id: FromPath[str], console: Console, state: State) -> Template:
    """The transcripts of a Session's conversations (a fragment of the Session's page)."""
    async with ctx_of(state).pool.acquire() as conn:
        session = await get_session(conn, console.tenant.id, session_id[:64])  # 404: unknown or another tenant's
        found = await inbox.session_conversations(conn, console.tenant.id, session.id)
        transcripts = [(c, await inbox.transcript(conn, c)) for c in found]
    return Template("_session_conversations.html", context={"transcripts": transcripts, "json_of": _json})


routes: list[Any] = [*conversation_stream.routes, inbox_page, inbox_rows, set_display_name, conversation_page, conversation_live, take_over,
                     hand_back, reply, close_confirm, close, assign, session_conversations]
