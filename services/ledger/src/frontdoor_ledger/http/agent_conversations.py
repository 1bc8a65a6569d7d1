"""The hosted conversation endpoint agents call (PAP §7): ``{ledger}/{slug}/conversations``.

Listed in the tenant's ``poppy.json`` ``agent.protocols`` when the tenant enables hosted
conversations. Every request carries the agent's DPoP-bound Session Token (draft 0.2) or its
``Poppy-Session`` JWT (PAP 1.0), checked as at every surface (`agent_auth.authenticate`):
the caller's account and scopes are the Session's sign-in now.

- ``POST /conversations`` ``{message, parent_conversation_id?}``: ``201``, a new conversation
  (or a Direct Conversation, §7.10); ``POST /conversations/{id}/messages`` ``{message}``: ``202``.
  Message IDs are idempotent per agent and user (PAP-7.3-01): a retry adds nothing, another
  body under the same ID is ``409 message_id_conflict``. With ``?wait`` or ``?cursor`` the
  answer is a page of events (as a read), else ``{conversation_id, status, responder}``.
- ``GET /conversations/{id}/events?cursor=&wait=``: a page (PAP-7.5-03), long-polled up to 30
  seconds, woken across processes; with ``Accept: text/event-stream`` a stream resumed from
  ``Last-Event-ID`` (§7.6), with display-only ``text-delta`` pieces, a comment every 15 s.
  When the process is told to stop (SIGTERM, `frontdoor_httpkit.shutdown_notice`), a stream
  ends at once after ``: restarting`` and a long poll answers what it has (the agent reconnects
  or polls again, reaching another process), so a deploy is not held by them.
- ``POST /conversations/{id}/handoff`` (``202``, §7.9) and ``/close`` (``200``, §7.12).
- Another user's conversation and an unknown one are the same ``404 conversation_not_found``
  (PAP-7.2-01); an account's conversation asks a signed-out Session to sign in
  (``403 sign_in_required``) and is unknown to another account's.
- Rate limits: per network, per Session, and per conversation (``429 rate_limited`` with
  ``Retry-After``); a message is at most 16 KiB of JSON.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from frontdoor_conversations import (
    Caller,
    Conversation,
    ConversationRefused,
    Page,
    parse_message,
    parse_wait,
    recent_deltas,
    store,
)
from frontdoor_conversations.rules import IDENTIFIER, check_owner
from frontdoor_core.redis_keys import shard
from frontdoor_httpkit import client_address, has_nul, shutdown_notice, url_has_nul
from frontdoor_operations.rules import CallerView
from frontdoor_protocol import ErrorCode, MalformedJSON, ProtocolError, loads_object
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath
from litestar.response import Stream

from ..agent_auth import Refused, authenticate, refusal
from ..context import LedgerContext, LedgerTenant
from ..conversations_hub import ConversationsHub
from .agent_operations import _limit

__all__ = ["routes"]

_NO_STORE = {"Cache-Control": "no-store"}
REQUESTS_PER_NETWORK_PER_MINUTE = 3000
REQUESTS_PER_SESSION_PER_MINUTE = 600
MESSAGES_PER_CONVERSATION_PER_MINUTE = 60
STARTS_PER_SESSION_PER_MINUTE = 60
KEEPALIVE_SECONDS = 15.0


def _hub(state: State) -> ConversationsHub:
    hub: ConversationsHub = state.conversations
    return hub


async def _caller(ctx: LedgerContext, hub: ConversationsHub, slug: str,
                  request: Request[Any, Any, Any]) -> tuple[LedgerTenant, CallerView, Caller]:
    network = client_address(request, ctx.settings.trusted_proxies)
    await _limit(ctx, f"ledger:net:{shard(slug[:64])}:{network}", REQUESTS_PER_NETWORK_PER_MINUTE)
    tenant = await ctx.tenant(slug)
    if tenant is None or not (await hub.hosted(tenant.tenant_id)).enabled:
        raise Refused(Response({"error": "not_found", "error_description": "No such resource."}, status_code=404,
                               headers=_NO_STORE))
    view = await authenticate(ctx, tenant, request)
    await _limit(ctx, f"ledger:cnv-ses:{tenant.tenant_id}:{view.session_id}", REQUESTS_PER_SESSION_PER_MINUTE)
    if url_has_nul(request):  # PostgreSQL's text cannot store a NUL: refused before any query names it
        raise Refused(refusal(ProtocolError(ErrorCode.INVALID_REQUEST, "The URL must not contain NUL characters."),
                              caller=view))
    caller = Caller(client_id=view.client_id, user_id=view.user_id, session_id=view.session_id,
                    account=view.account, scopes=view.scopes)
    return tenant, view, caller


def _refused(exc: ConversationRefused, view: CallerView) -> Response[Any]:
    extra = {"conversation_id": exc.conversation_id} if exc.conversation_id else None
    return refusal(exc.error, body_extra=extra, caller=view)


async def _body(request: Request[Any, Any, Any], view: CallerView) -> dict[str, Any]:
    try:
        body = loads_object(await request.body())
    except MalformedJSON:
        raise Refused(refusal(ProtocolError(ErrorCode.INVALID_REQUEST, "The body must be a JSON object."),
                              caller=view)) from None
    if has_nul(body):  # text, data, context, IDs: jsonb and text cannot store a NUL, so nothing is written
        raise Refused(refusal(ProtocolError(ErrorCode.INVALID_REQUEST, "Strings must not contain NUL characters."),
                              caller=view))
    return body


def _message(body: dict[str, Any], view: CallerView) -> Any:
    try:
        return parse_message(body.get("message"))
    except ProtocolError as error:
        raise Refused(refusal(error, caller=view)) from None


def _wait(request: Request[Any, Any, Any], view: CallerView) -> int:
    wait = parse_wait(request.query_params.get("wait"))
    if isinstance(wait, ProtocolError):
        raise Refused(refusal(wait, caller=view))
    return wait


def _page_body(conversation: Conversation, page: Page) -> dict[str, Any]:
    return {"conversation_id": conversation.id, "events": page.events, "cursor": page.cursor,
            "has_more": page.has_more, "status": conversation.status, "responder": conversation.responder}


async def _owned(ctx: LedgerContext, tenant: LedgerTenant, view: CallerView, caller: Caller,
                 conversation_id: str) -> Conversation:
    async with ctx.pool.acquire() as conn:
        conversation = await store.find(conn, tenant.tenant_id, conversation_id)
    error = check_owner(conversation.view() if conversation else None, caller)
    if error is not None:
        raise Refused(refusal(error, caller=view))
    assert conversation is not None
    return conversation


async def _read(ctx: LedgerContext, hub: ConversationsHub, tenant: LedgerTenant, view: CallerView, *,
                conversation_id: str, cursor: str | None, wait: int) -> tuple[Conversation, Page]:
    """A page after ``cursor``; with nothing new, wait up to ``wait`` seconds for it (woken, not polled)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    with hub.waiters.subscribe(tenant.tenant_id, conversation_id) as reader, shutdown_notice.wakes(reader.changed):
        while True:
            reader.changed.clear()  # before reading: a change after the read still wakes us
            async with ctx.pool.acquire() as conn:
                conversation = await store.find(conn, tenant.tenant_id, conversation_id)
                assert conversation is not None
                try:
                    page = await store.read_page(conn, conversation, cursor)
                except ConversationRefused as exc:
                    raise Refused(_refused(exc, view)) from None
            remaining = deadline - loop.time()
            if page.events or conversation.status == "closed" or remaining <= 0 or shutdown_notice.begun:
                return conversation, page
            try:
                async with asyncio.timeout(remaining):
                    await reader.changed.wait()
            except TimeoutError:
                deadline = loop.time()  # one last read, then answer


async def _answer(ctx: LedgerContext, hub: ConversationsHub, tenant: LedgerTenant, view: CallerView, *,
                  request: Request[Any, Any, Any], conversation: Conversation, status: int) -> Response[Any]:
    query = request.query_params
    if "wait" in query or "cursor" in query:
        cursor = query.get("cursor") or None
        current, page = await _read(ctx, hub, tenant, view, conversation_id=conversation.id, cursor=cursor,
                                    wait=_wait(request, view))
        return Response(_page_body(current, page), status_code=status, headers=_NO_STORE)
    async with ctx.pool.acquire() as conn:
        fresh = await store.find(conn, tenant.tenant_id, conversation.id)
    return Response((fresh or conversation).receipt(), status_code=status, headers=_NO_STORE)


@post("/{slug:str}/conversations", status_code=201)
async def start_conversation(slug: FromPath[str], request: Request[Any, Any, Any], state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    hub = _hub(state)
    tenant, view, caller = await _caller(ctx, hub, slug, request)
    body = await _body(request, view)
    message = _message(body, view)
    parent = body.get("parent_conversation_id")
    if parent is not None and (not isinstance(parent, str) or not IDENTIFIER.fullmatch(parent)):
        return refusal(ProtocolError(ErrorCode.INVALID_REQUEST, "parent_conversation_id must be a conversation ID."),
                       caller=view)
    await _limit(ctx, f"ledger:cnv-start:{tenant.tenant_id}:{caller.session_id}", STARTS_PER_SESSION_PER_MINUTE)
    relay = await hub.relay_target(tenant.tenant_id)
    try:
        async with ctx.pool.acquire() as conn:
            posted = await store.start(conn, tenant.tenant_id, caller, message, parent_id=parent, now=ctx.now(),
                                       relay=relay, lease=hub.lease)
            attempts = hub.after_commit(tenant.tenant_id, posted, also_changed=parent)  # no await since the commit
    except ConversationRefused as exc:
        return _refused(exc, view)
    await hub.wait_for_replies(attempts)
    return await _answer(ctx, hub, tenant, view, request=request, conversation=posted.conversation, status=201)


@post("/{slug:str}/conversations/{conversation_id:str}/messages", status_code=202)
async def post_message(slug: FromPath[str], conversation_id: FromPath[str], request: Request[Any, Any, Any],
                       state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    hub = _hub(state)
    tenant, view, caller = await _caller(ctx, hub, slug, request)
    message = _message(await _body(request, view), view)
    await _limit(ctx, f"ledger:cnv:{shard(tenant.tenant_id)}:{conversation_id[:64]}", MESSAGES_PER_CONVERSATION_PER_MINUTE)
    relay = await hub.relay_target(tenant.tenant_id)
    try:
        async with ctx.pool.acquire() as conn:
            posted = await store.post_message(conn, tenant.tenant_id, caller, conversation_id, message, now=ctx.now(),
                                              relay=relay, lease=hub.lease)
            attempts = hub.after_commit(tenant.tenant_id, posted)  # no await since the commit
    except ConversationRefused as exc:
        return _refused(exc, view)
    await hub.wait_for_replies(attempts)
    return await _answer(ctx, hub, tenant, view, request=request, conversation=posted.conversation, status=202)


@post("/{slug:str}/conversations/{conversation_id:str}/handoff", status_code=202)
async def handoff(slug: FromPath[str], conversation_id: FromPath[str], request: Request[Any, Any, Any],
                  state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    hub = _hub(state)
    tenant, view, caller = await _caller(ctx, hub, slug, request)
    try:
        async with ctx.pool.acquire() as conn:
            conversation = await store.handoff(conn, tenant.tenant_id, caller, conversation_id, now=ctx.now())
    except ConversationRefused as exc:
        return _refused(exc, view)
    await hub.changed(tenant.tenant_id, conversation_id)
    return Response(conversation.receipt(), status_code=202, headers=_NO_STORE)


@post("/{slug:str}/conversations/{conversation_id:str}/close", status_code=200)
async def close(slug: FromPath[str], conversation_id: FromPath[str], request: Request[Any, Any, Any],
                state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    hub = _hub(state)
    tenant, view, caller = await _caller(ctx, hub, slug, request)
    try:
        async with ctx.pool.acquire() as conn:
            conversation = await store.close(conn, tenant.tenant_id, conversation_id, now=ctx.now(), caller=caller)
    except ConversationRefused as exc:
        return _refused(exc, view)
    await hub.changed(tenant.tenant_id, conversation_id)
    if conversation.parent_id is not None:
        await hub.changed(tenant.tenant_id, conversation.parent_id)
    return Response(conversation.receipt(), status_code=200, headers=_NO_STORE)


@get("/{slug:str}/conversations/{conversation_id:str}/events")
async def read_events(slug: FromPath[str], conversation_id: FromPath[str], request: Request[Any, Any, Any],
                      state: State) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    hub = _hub(state)
    tenant, view, caller = await _caller(ctx, hub, slug, request)
    await _owned(ctx, tenant, view, caller, conversation_id)
    if "text/event-stream" in request.headers.get("accept", ""):
        # Last-Event-ID wins over `cursor`: a reconnecting client sends it with the first URL (§7.6).
        cursor = request.headers.get("last-event-id") or request.query_params.get("cursor") or None
        conversation, first = await _read(ctx, hub, tenant, view, conversation_id=conversation_id, cursor=cursor, wait=0)
        return Stream(_frames(ctx, hub, tenant, conversation, first), media_type="text/event-stream",
                      headers={**_NO_STORE, "X-Accel-Buffering": "no"})
    conversation, page = await _read(ctx, hub, tenant, view, conversation_id=conversation_id,
                                     cursor=request.query_params.get("cursor") or None, wait=_wait(request, view))
    return Response(_page_body(conversation, page), status_code=200, headers=_NO_STORE)


def _frame(data: dict[str, Any], *, event_id: str | None = None, name: str | None = None) -> bytes:
    head = (f"id: {event_id}\n" if event_id else "") + (f"event: {name}\n" if name else "")
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _frames(ctx: LedgerContext, hub: ConversationsHub, tenant: LedgerTenant, conversation: Conversation,
                  first: Page) -> AsyncIterator[bytes]:
    """The stream: the backlog, then new events as they are written, until closed or the duration ends.

    A company message's streamed pieces (``text-delta``, for display only, PAP-7.6-01) come
    before it: live as the company sends them, or, for a message written in the last
    minutes, the pieces Frontdoor still keeps. The complete ``message`` event replaces them.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ctx.settings.conversation_stream_duration.total_seconds()
    redis = ctx.runtime.redis
    cursor = first.cursor
    page: Page | None = first
    live: set[str] = set()   # messages whose pieces this stream sent as they came
    complete: set[str] = set()
    yield b": poppy\n\n"
    with hub.waiters.subscribe(tenant.tenant_id, conversation.id) as reader, shutdown_notice.wakes(reader.changed):
        while True:
            if page is None:
                reader.changed.clear()
                async with ctx.pool.acquire() as conn:
                    current = await store.find(conn, tenant.tenant_id, conversation.id)
                    if current is None:
                        return
                    try:
                        page = await store.read_page(conn, current, cursor)
                    except ConversationRefused:
                        return  # retention moved past us: the agent reconnects and is told
            for event in page.events:
                message = event.get("message")
                if event.get("type") == "message" and isinstance(message, dict) and message.get("role") == "company":
                    complete.add(str(message["id"]))
                    if message["id"] not in live:
                        for delta in await recent_deltas(redis, tenant.tenant_id, str(message["id"])):
                            yield _frame(delta, name="text-delta")
                yield _frame(event, event_id=str(event["id"]))
                cursor = str(event["id"])
                if event.get("type") == "state" and event.get("status") == "closed":
                    return
            more = page.has_more
            page = None
            if more:
                continue
            for delta in reader.take_deltas():
                if delta.get("message_id") not in complete:
                    live.add(str(delta.get("message_id")))
                    yield _frame(delta, name="text-delta")
            if shutdown_notice.begun:  # this process stops: the agent resumes elsewhere with Last-Event-ID
                yield b": restarting\n\n"
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            try:
                async with asyncio.timeout(min(KEEPALIVE_SECONDS, remaining)):
                    await reader.changed.wait()
            except TimeoutError:
                if deadline - loop.time() > 0:
                    yield b": keep-alive\n\n"  # GUIDE-co-conv-01


routes = [start_conversation, post_message, handoff, close, read_events]
