"""The company's side of hosted conversations: ``{ledger}/{slug}/v1/conversations``.

The company's agent (or a person at the company) answers with its resource-server
credential, as for ``/v1/operations``. It hears of each user message through the
``conversation.message.created`` webhook. Nothing a user wrote is ever run by Frontdoor:
messages are stored and relayed as data.

- ``GET /v1/conversations?status=``: the inbox, most recently changed first.
- ``GET /v1/conversations/{id}?cursor=``: the conversation and a page of its events.
- ``POST /v1/conversations/{id}/messages`` ``{message: {id?, text?, data?, operation_id?}, sender?, done?}``:
  a reply (``role: company``; ``sender`` ``agent`` or ``human``, PAP-7.7-02); ``done``
  (default true) ends the turn (``idle``). ``id`` makes it idempotent. ``operation_id``
  names an operation the company proposed for this conversation's agent and user: the
  message carries it (``operation``, as the operations endpoint shows it; OPS-4-01).
- ``POST .../deltas`` ``{message_id, text}``: a piece of a reply being written, shown by
  streaming agents before the complete message (display only, §7.6).
- ``POST .../authorization`` ``{scope, error?}``: ask the agent to sign the user in for
  ``scope`` (§7.11; ``error`` ``sign_in_required`` or ``insufficient_scope``).
- ``POST .../user-requested`` ``{reason}``: the company needs the user themselves.
- ``POST .../responder`` ``{responder}``: a person takes over (``human``) or hands back.
- ``POST .../close``; ``POST .../forget-events`` ``{keep_last}``: forget older events now
  (their cursors answer ``cursor_expired``), as retention does after ``retention_days``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from frontdoor_conversations import Conversation, ConversationRefused, publish_delta, store
from frontdoor_conversations.rules import (
    IDENTIFIER,
    MAX_DELTA_CHARS,
    MAX_MESSAGE_BYTES,
    MAX_REASON_CHARS,
    authorization_event,
    check_delta,
    user_requested_event,
)
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_operations import ledger
from frontdoor_operations.ledger import to_wire
from litestar import Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath

from ..context import LedgerContext, LedgerTenant
from ..conversations_hub import ConversationsHub
from .company_api import _COMPANY, _decode, _error

__all__ = ["routes"]

_NO_STORE = {"Cache-Control": "no-store"}
_STATUSES = frozenset({"working", "idle", "queued", "closed"})


def _hub(state: State) -> ConversationsHub:
    hub: ConversationsHub = state.conversations
    return hub


async def _enabled(state: State, company: LedgerTenant) -> None:
    if not (await _hub(state).hosted(company.tenant_id)).enabled:
        raise NotFound("conversations_not_enabled", "Hosted conversations are not enabled for this tenant.")


def _refused(exc: ConversationRefused) -> Response[Any]:
    status = exc.error.status
    return _error(status, str(exc.error.code), exc.error.description or "Refused.")


def _view(conversation: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": conversation.id, "status": conversation.status, "responder": conversation.responder,
        "client_id": conversation.client_id, "user_id": conversation.user_id, "account": conversation.account_id,
        "session_id": conversation.session_id, "parent_conversation_id": conversation.parent_id,
        "direct_conversation_id": conversation.direct_child_id,
        "created_at": conversation.created_at.isoformat(), "updated_at": conversation.updated_at.isoformat(),
    }


class ReplyMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str | None = None
    text: str | None = None
    data: dict[str, Any] | None = None
    operation_id: str | None = None


class ReplyBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    message: ReplyMessage
    sender: Literal["agent", "human"] = "agent"
    done: bool = True


class DeltaBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    message_id: str
    text: str


class AuthorizationBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    scope: str
    error: Literal["sign_in_required", "insufficient_scope"] = "sign_in_required"


class UserRequestedBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    reason: str


class ResponderBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    responder: Literal["agent", "human"]


class ForgetBody(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    keep_last: int = 1


async def _changed(state: State, company: LedgerTenant, conversation: Conversation) -> None:
    await _hub(state).changed(company.tenant_id, conversation.id)


@get("/{slug:str}/v1/conversations", dependencies=_COMPANY)
async def list_conversations(company: LedgerTenant, state: State, status: str | None = None) -> Response[Any]:
    await _enabled(state, company)
    if status is not None and status not in _STATUSES:
        raise Invalid("invalid_request", "status must be working, idle, queued or closed.")
    ctx: LedgerContext = state.ctx
    async with ctx.pool.acquire() as conn:
        found = await store.list_conversations(conn, company.tenant_id, status=status)
    return Response({"conversations": [_view(c) for c in found]}, headers=_NO_STORE)


async def _find(ctx: LedgerContext, company: LedgerTenant, conversation_id: str) -> Conversation:
    async with ctx.pool.acquire() as conn:
        conversation = await store.find(conn, company.tenant_id, conversation_id)
    if conversation is None:
        raise NotFound("conversation_not_found", "No such conversation.")
    return conversation


@get("/{slug:str}/v1/conversations/{conversation_id:str}", dependencies=_COMPANY)
async def read_conversation(conversation_id: FromPath[str], company: LedgerTenant, state: State,
                            cursor: str | None = None) -> Response[Any]:
    await _enabled(state, company)
    ctx: LedgerContext = state.ctx
    conversation = await _find(ctx, company, conversation_id)
    try:
        async with ctx.pool.acquire() as conn:
            page = await store.read_page(conn, conversation, cursor)
    except ConversationRefused as exc:
        return _refused(exc)
    return Response({"conversation": _view(conversation), "events": page.events, "cursor": page.cursor,
                     "has_more": page.has_more}, headers=_NO_STORE)


async def _operation_for(ctx: LedgerContext, company: LedgerTenant, conversation: Conversation,
                         operation_id: str) -> dict[str, Any]:
    """The operation a reply carries, as the agent's operations endpoint shows it.

    Only one proposed for the conversation's own agent and user (and account, once the
    conversation has one): another's is ``operation_not_found``, like an unknown one.
    """
    async with ctx.pool.acquire() as conn:
        op = await ledger.get_operation(conn, company.tenant_id, operation_id) if IDENTIFIER.fullmatch(
            operation_id) else None
    theirs = op is not None and (op.client_id, op.user_id) == (conversation.client_id, conversation.user_id)
    if op is None or not theirs or (conversation.account_id is not None and op.account_id != conversation.account_id):
        raise NotFound("operation_not_found", "No such operation for this conversation's agent and user.")
    return to_wire(op)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/messages", dependencies=_COMPANY, status_code=201)
async def reply(conversation_id: FromPath[str], company: LedgerTenant, state: State, body: bytes) -> Response[Any]:
    await _enabled(state, company)
    ctx: LedgerContext = state.ctx
    parsed: ReplyBody = _decode(body, ReplyBody)
    m = parsed.message
    if m.id is not None and not IDENTIFIER.fullmatch(m.id):
        raise Invalid("invalid_request", "message.id must be 1 to 256 URL-safe base64 characters.")
    if m.text is None and m.data is None:
        raise Invalid("invalid_request", "A message needs text or data.")
    if len(body) > MAX_MESSAGE_BYTES + 256:
        raise Invalid("invalid_request", f"The message is larger than {MAX_MESSAGE_BYTES} bytes.")
    operation = None
    if m.operation_id is not None:
        operation = await _operation_for(ctx, company, await _find(ctx, company, conversation_id), m.operation_id)
    try:
        async with ctx.pool.acquire() as conn:
            conversation, message = await store.company_message(
                conn, company.tenant_id, conversation_id, message_id=m.id, text=m.text, data=m.data,
                sender=parsed.sender, done=parsed.done, now=ctx.now(), operation=operation)
    except ConversationRefused as exc:
        return _refused(exc)
    await _changed(state, company, conversation)
    return Response({"conversation": _view(conversation), "message": message}, status_code=201, headers=_NO_STORE)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/deltas", dependencies=_COMPANY, status_code=202)
async def delta(conversation_id: FromPath[str], company: LedgerTenant, state: State, body: bytes) -> Response[Any]:
    await _enabled(state, company)
    ctx: LedgerContext = state.ctx
    parsed: DeltaBody = _decode(body, DeltaBody)
    if check_delta(parsed.message_id, parsed.text) is not None:  # display only (§7.6)
        raise Invalid("invalid_request", f"A delta needs a message_id and 1 to {MAX_DELTA_CHARS} characters of text.")
    conversation = await _find(ctx, company, conversation_id)
    if conversation.status == "closed":
        return _error(409, "conversation_closed", "This conversation is closed.")
    await publish_delta(ctx.runtime.redis, company.tenant_id, conversation.id, parsed.message_id, parsed.text)
    return Response({"accepted": True}, status_code=202, headers=_NO_STORE)


async def _event(state: State, company: LedgerTenant, conversation_id: str, draft: dict[str, Any]) -> Response[Any]:
    ctx: LedgerContext = state.ctx
    try:
        async with ctx.pool.acquire() as conn:
            conversation = await store.company_event(conn, company.tenant_id, conversation_id, draft, now=ctx.now())
    except ConversationRefused as exc:
        return _refused(exc)
    await _changed(state, company, conversation)
    return Response({"conversation": _view(conversation)}, status_code=201, headers=_NO_STORE)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/authorization", dependencies=_COMPANY, status_code=201)
async def authorization(conversation_id: FromPath[str], company: LedgerTenant, state: State,
                        body: bytes) -> Response[Any]:
    await _enabled(state, company)
    parsed: AuthorizationBody = _decode(body, AuthorizationBody)
    draft = authorization_event(parsed.scope, parsed.error)  # PAP-7.11-01
    if isinstance(draft, str):
        raise Invalid("invalid_request", "scope names the scopes to sign in for, space-separated.")
    return await _event(state, company, conversation_id, draft)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/user-requested", dependencies=_COMPANY, status_code=201)
async def user_requested(conversation_id: FromPath[str], company: LedgerTenant, state: State,
                         body: bytes) -> Response[Any]:
    await _enabled(state, company)
    parsed: UserRequestedBody = _decode(body, UserRequestedBody)
    draft = user_requested_event(parsed.reason)  # the rule a relay answer's event follows too
    if isinstance(draft, str):
        raise Invalid("invalid_request", f"reason: 1 to {MAX_REASON_CHARS} characters.")
    return await _event(state, company, conversation_id, draft)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/responder", dependencies=_COMPANY, status_code=200)
async def responder(conversation_id: FromPath[str], company: LedgerTenant, state: State,
                    body: bytes) -> Response[Any]:
    await _enabled(state, company)
    ctx: LedgerContext = state.ctx
    parsed: ResponderBody = _decode(body, ResponderBody)
    try:
        async with ctx.pool.acquire() as conn:
            conversation = await store.set_responder(conn, company.tenant_id, conversation_id, parsed.responder,
                                                     now=ctx.now())
    except ConversationRefused as exc:
        return _refused(exc)
    await _changed(state, company, conversation)
    return Response({"conversation": _view(conversation)}, headers=_NO_STORE)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/close", dependencies=_COMPANY, status_code=200)
async def close(conversation_id: FromPath[str], company: LedgerTenant, state: State) -> Response[Any]:
    await _enabled(state, company)
    ctx: LedgerContext = state.ctx
    try:
        async with ctx.pool.acquire() as conn:
            conversation = await store.close(conn, company.tenant_id, conversation_id, now=ctx.now())
    except ConversationRefused as exc:
        return _refused(exc)
    await _changed(state, company, conversation)
    if conversation.parent_id is not None:
        await _hub(state).changed(company.tenant_id, conversation.parent_id)
    return Response({"conversation": _view(conversation)}, headers=_NO_STORE)


@post("/{slug:str}/v1/conversations/{conversation_id:str}/forget-events", dependencies=_COMPANY, status_code=200)
async def forget_events(conversation_id: FromPath[str], company: LedgerTenant, state: State,
                        body: bytes) -> Response[Any]:
    await _enabled(state, company)
    ctx: LedgerContext = state.ctx
    parsed: ForgetBody = _decode(body or b"{}", ForgetBody)
    if not 0 <= parsed.keep_last <= 10_000:
        raise Invalid("invalid_request", "keep_last: 0 to 10000.")
    conversation = await _find(ctx, company, conversation_id)
    async with ctx.pool.acquire() as conn:
        forgotten = await store.forget_events(conn, company.tenant_id, conversation.id, keep_last=parsed.keep_last,
                                              now=ctx.now())
    return Response({"forgotten": forgotten}, headers=_NO_STORE)


routes = [list_conversations, read_conversation, reply, delta, authorization, user_requested, responder, close,
          forget_events]
