"""Conversations in PostgreSQL: each use case one transaction, the conversation row locked.

Appending to a conversation locks its row (``SELECT ... FOR UPDATE``) and moves its
``last_seq``: events of one conversation are totally ordered, whoever writes them. A
Direct Conversation and its parent are always locked parent first. The webhook message
telling the company's agent about a user's message is written in the same transaction
(the outbox, ADR 0003), and so is, in the relay mode, the relay's own webhook message,
leased to the writing process in that transaction (ADR 0006, addendum): if that process
dies before the relay is answered, a deliverer takes it once the lease ends. Callers
publish the wake-up (`wakeups.publish`) after the commit.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
from frontdoor_core.errors import NotFound
from frontdoor_core.ids import new_id
from frontdoor_protocol import ErrorCode, ProtocolError
from frontdoor_webhooks.delivery import ClaimedMessage, claim
from frontdoor_webhooks.endpoints import get_endpoint
from frontdoor_webhooks.event_payloads import payload_for
from frontdoor_webhooks.messages import enqueue_event, enqueue_message

from .relay import RELAY_EVENT_TYPE, RelayTarget
from .rules import (
    IDENTIFIER,
    MAX_RESPONDER_NAME,
    PAGE_SIZE,
    Caller,
    ConversationView,
    IncomingMessage,
    Responder,
    Transition,
    check_direct_parent,
    check_open,
    check_owner,
    message_digest,
    on_close,
    on_company_message,
    on_handoff,
    on_responder,
    on_user_message,
    replay_decision,
    user_scope,
)

__all__ = [
    "HANDOFF_REQUESTED",
    "MESSAGE_CREATED",
    "Conversation",
    "ConversationRefused",
    "Page",
    "Posted",
    "claim_relay_answer",
    "close",
    "company_event",
    "company_message",
    "find",
    "forget_events",
    "forget_older_than",
    "handoff",
    "list_conversations",
    "post_message",
    "queue_for_person",
    "read_page",
    "relay_answered",
    "set_responder",
    "start",
]

MESSAGE_CREATED = "conversation.message.created"
HANDOFF_REQUESTED = "conversation.handoff_requested"


class ConversationRefused(Exception):
    """A protocol refusal; ``conversation_id`` names an open Direct Conversation when there is one."""

    def __init__(self, error: ProtocolError, *, conversation_id: str | None = None) -> None:
        super().__init__(str(error.code))
        self.error = error
        self.conversation_id = conversation_id


class Conversation(msgspec.Struct, frozen=True, kw_only=True):
    """A stored conversation."""

    id: str
    tenant_id: str
    client_id: str
    user_id: str
    account_id: str | None
    session_id: str
    parent_id: str | None
    direct_child_id: str | None
    status: Any
    responder: Any
    last_seq: int
    created_at: datetime
    updated_at: datetime

    def view(self) -> ConversationView:
        return ConversationView(id=self.id, client_id=self.client_id, user_id=self.user_id,
                                account_id=self.account_id, parent_id=self.parent_id,
                                direct_child_id=self.direct_child_id, status=self.status, responder=self.responder)

    def receipt(self) -> dict[str, Any]:
        """``conversation_id``, ``status`` and ``responder`` (PAP-7.7-01)."""
        return {"conversation_id": self.id, "status": self.status, "responder": self.responder}


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """One page of events after a cursor (PAP-7.5-03)."""

    events: list[dict[str, Any]]
    cursor: str
    has_more: bool


class Posted(msgspec.Struct, frozen=True, kw_only=True):
    """A message received: its conversation, whether it was a retry, and the webhook messages written."""

    conversation: Conversation
    replay: bool
    webhook_message_ids: list[str]
    # The relay mode: the relay's webhook message, claimed by this process (None on a replay,
    # without a relay, while a person answers, or when the relay endpoint is gone or disabled).
    relay: ClaimedMessage | None = None
    # With a ``lease``: the webhook messages this process claimed in the message's transaction
    # (those of enabled endpoints), so that no deliverer sends them before this process tries.
    webhook_claims: list[ClaimedMessage] = msgspec.field(default_factory=list)


_COLUMNS = ("id, tenant_id, client_id, user_id, account_id, session_id, parent_id, direct_child_id, status,"
            " responder, last_seq, created_at, updated_at")


def _row(row: asyncpg.Record | None) -> Conversation | None:
    return None if row is None else Conversation(**dict(row))


def _refuse(error: ProtocolError | None, conversation: Conversation | None = None) -> None:
    if error is None:
        return
    open_direct = conversation.direct_child_id if conversation is not None else None
    raise ConversationRefused(error, conversation_id=open_direct if error.code == ErrorCode.DIRECT_CONVERSATION_OPEN
                              else None)


async def find(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, *,
               lock: bool = False) -> Conversation | None:
    """The conversation, or None (an ID of the wrong shape is unknown too)."""
    if not IDENTIFIER.fullmatch(conversation_id):
        return None
    return _row(await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM conversations WHERE tenant_id = $1 AND id = $2" + (" FOR UPDATE" if lock else ""),  # noqa: S608 - constant column list
        tenant_id, conversation_id))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _apply(conn: asyncpg.Connection, conversation: Conversation, change: Transition, now: datetime, *,
                 account_id: str | None = None, direct_child_id: Any = ...) -> Conversation:
    """Append ``change.events`` in order and store the new status, responder (and account)."""
    drafts = change.events
    first = conversation.last_seq + 1
    rows = []
    for offset, draft in enumerate(drafts):
        event_id = new_id("evt")
        rows.append((conversation.tenant_id, conversation.id, first + offset, event_id, draft["type"],
                     {"id": event_id, "created_at": _iso(now), **draft}, now))
    if rows:
        await conn.executemany(
            "INSERT INTO conversation_events (tenant_id, conversation_id, seq, id, type, payload, created_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7)", rows)
    child = conversation.direct_child_id if direct_child_id is ... else direct_child_id
    updated = _row(await conn.fetchrow(
        f"UPDATE conversations SET status = $3, responder = $4, last_seq = $5, account_id = $6,"  # noqa: S608 - constant column list
        f" direct_child_id = $7, updated_at = $8 WHERE tenant_id = $1 AND id = $2 RETURNING {_COLUMNS}",
        conversation.tenant_id, conversation.id, change.status, change.responder, conversation.last_seq + len(rows),
        account_id if account_id is not None else conversation.account_id, child, now))
    assert updated is not None
    return updated


def _unchanged(conversation: Conversation) -> Transition:
    return Transition(status=conversation.status, responder=conversation.responder)


async def _known_message(conn: asyncpg.Connection, tenant_id: str, scope: str,
                         message_id: str) -> tuple[str, str] | None:
    row = await conn.fetchrow("SELECT conversation_id, digest FROM conversation_message_ids"
                              " WHERE tenant_id = $1 AND scope = $2 AND message_id = $3",
                              tenant_id, scope, message_id)
    return None if row is None else (row["conversation_id"], row["digest"])


async def _claim_message(conn: asyncpg.Connection, tenant_id: str, scope: str, message_id: str, *,
                         conversation_id: str, digest: str, now: datetime) -> bool:
    """Record the message ID once; False when another request recorded it first (it committed)."""
    claimed = await conn.fetchval(
        "INSERT INTO conversation_message_ids (tenant_id, scope, message_id, conversation_id, digest, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING true",
        tenant_id, scope, message_id, conversation_id, digest, now)
    return bool(claimed)


def _webhook_data(conversation: Conversation, caller: Caller, message: IncomingMessage,
                  event_id: str, sequence: int) -> dict[str, Any]:
    return {
        "conversation_id": conversation.id,
        "parent_conversation_id": conversation.parent_id,
        "event_id": event_id,
        "message": message.wire("user"),
        "session_id": caller.session_id,
        "client_id": caller.client_id,
        "user_id": caller.user_id,
        "account": caller.account,
        "scopes": sorted(caller.scopes),
        "responder": conversation.responder,
        "status": conversation.status,
        "sequence": sequence,
    }


async def _last_message_event(conn: asyncpg.Connection, conversation: Conversation, message_id: str) -> tuple[str, int]:
    row = await conn.fetchrow(
        "SELECT id, seq FROM conversation_events WHERE tenant_id = $1 AND conversation_id = $2 AND type = 'message'"
        " AND payload->'message'->>'id' = $3 ORDER BY seq DESC LIMIT 1",
        conversation.tenant_id, conversation.id, message_id)
    assert row is not None
    return row["id"], int(row["seq"])


async def _relay(conn: asyncpg.Connection, conversation: Conversation, data: dict[str, Any], target: RelayTarget,
                 now: datetime) -> tuple[Conversation, ClaimedMessage | None]:
    """Write the relay of the agent's message and take its lease, in the message's transaction.

    A relay endpoint deleted or disabled cannot answer: the conversation is queued for a
    person at once (as a failed relay is), and nothing is written for the endpoint.
    """
    try:
        endpoint = await get_endpoint(conn, conversation.tenant_id, target.endpoint_id)
    except NotFound:
        endpoint = None
    if endpoint is None or not endpoint.enabled:
        change = on_handoff(conversation.view())
        return (conversation if change is None else await _apply(conn, conversation, change, now)), None
    message_id = await enqueue_message(conn, conversation.tenant_id, target.endpoint_id, RELAY_EVENT_TYPE, data,
                                       purpose="relay", now=now)
    # The writer's claim: deliverers skip the message until the lease ends (the writer died).
    return conversation, await claim(conn, message_id, now, target.lease, tenant_id=conversation.tenant_id)


async def _receive(conn: asyncpg.Connection, conversation: Conversation, caller: Caller, message: IncomingMessage, *,
                   now: datetime, relay: RelayTarget | None, lease: timedelta | None = None) -> Posted:
    change = on_user_message(conversation.view(), message)
    # Once used signed in, the conversation belongs to the account (PAP-7.2-01, §7.11).
    updated = await _apply(conn, conversation, change, now, account_id=caller.account)
    event_id, seq = await _last_message_event(conn, updated, message.id)
    data = payload_for(MESSAGE_CREATED, _webhook_data(updated, caller, message, event_id, seq))
    ids = await enqueue_event(conn, updated.tenant_id, MESSAGE_CREATED, data, now)
    # The writer's claim, as the relay's: a deliverer woken by the messages' notification at
    # commit (another process) skips them until the lease ends (this process died), so the
    # agent's request, which waits for the first delivery (the company agent replying while
    # it answers), is not answered before it; an unclaimed one (a disabled endpoint) waits.
    webhook_claims = []
    if lease is not None:
        for message_id in ids:
            held = await claim(conn, message_id, now, lease, tenant_id=updated.tenant_id)
            if held is not None:
                webhook_claims.append(held)
    claimed = None
    if relay is not None and updated.responder == "agent":  # while a person answers nothing is relayed (§7.9)
        updated, claimed = await _relay(conn, updated, data, relay, now)
    return Posted(conversation=updated, replay=False, webhook_message_ids=ids, relay=claimed,
                  webhook_claims=webhook_claims)


async def claim_relay_answer(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, event_id: str, *,
                             digest: str, now: datetime) -> bool:
    """Note that the company's answer to the agent message ``event_id`` is being recorded; False
    when one was already (a relay sent again: a redelivery, or a recovery after a crash).

    In the recording's transaction: the first answer is recorded exactly once, whatever
    arrives later (the replies' own IDs are idempotent too, PAP-7.3-01).
    """
    return await _claim_message(conn, tenant_id, f"relay {conversation_id}", event_id,
                                conversation_id=conversation_id, digest=digest, now=now)


async def relay_answered(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, event_id: str) -> bool:
    """Whether the company's answer to the agent message ``event_id`` was recorded (`claim_relay_answer`)."""
    return await _known_message(conn, tenant_id, f"relay {conversation_id}", event_id) is not None


async def start(conn: asyncpg.Connection, tenant_id: str, caller: Caller, message: IncomingMessage, *,
                parent_id: str | None, now: datetime, relay: RelayTarget | None = None,
                lease: timedelta | None = None) -> Posted:
    """Start a conversation (``201``), or a Direct Conversation under ``parent_id`` (§7.10).

    ``relay``: the relay mode's endpoint; the message's relay is written and claimed with it.
    ``lease``: the message's ``conversation.message.created`` webhook messages are claimed with
    it too (`Posted.webhook_claims`), for the caller to attempt at once (see `_receive`).

    A retried start (same message ID and content) answers the conversation it started,
    if the caller may read it now; a reused ID with other content is ``message_id_conflict``.

    Raises:
        ConversationRefused: the protocol refusal.
    """
    scope = user_scope(caller)
    digest = message_digest(message, parent_id=parent_id)
    async with conn.transaction():
        decision = replay_decision(await _known_message(conn, tenant_id, scope, message.id), digest)
        if isinstance(decision, ProtocolError):
            _refuse(decision)
        if decision == "replay":
            return await _replayed(conn, tenant_id, caller, scope, message.id)
        parent = None
        if parent_id is not None:
            parent = await find(conn, tenant_id, parent_id, lock=True)
            _refuse(check_direct_parent(parent.view() if parent else None, caller), parent)
        conversation_id = new_id("cnv")
        if not await _claim_message(conn, tenant_id, scope, message.id, conversation_id=conversation_id,
                                    digest=digest, now=now):
            claimed = True
        else:
            claimed = False
            created = _row(await conn.fetchrow(
                "INSERT INTO conversations (tenant_id, id, client_id, user_id, account_id, session_id, parent_id,"  # noqa: S608 - constant column list
                " status, responder, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'idle', 'agent', $8, $8)"
                f" RETURNING {_COLUMNS}",
                tenant_id, conversation_id, caller.client_id, caller.user_id, caller.account, caller.session_id,
                parent_id, now))
            assert created is not None
            if parent is not None:
                opened = Transition(status=parent.status, responder=parent.responder,
                                    events=({"type": "direct_opened", "conversation_id": conversation_id},))
                await _apply(conn, parent, opened, now, direct_child_id=conversation_id)
            posted = await _receive(conn, created, caller, message, now=now, relay=relay, lease=lease)
    if claimed:  # a concurrent request with the same message ID committed first: this one is its retry
        return await start(conn, tenant_id, caller, message, parent_id=parent_id, now=now, relay=relay, lease=lease)
    return posted


async def _replayed(conn: asyncpg.Connection, tenant_id: str, caller: Caller, scope: str,
                    message_id: str) -> Posted:
    known = await _known_message(conn, tenant_id, scope, message_id)
    assert known is not None
    conversation = await find(conn, tenant_id, known[0])
    _refuse(check_owner(conversation.view() if conversation else None, caller))
    assert conversation is not None
    return Posted(conversation=conversation, replay=True, webhook_message_ids=[])


async def post_message(conn: asyncpg.Connection, tenant_id: str, caller: Caller, conversation_id: str,
                       message: IncomingMessage, *, now: datetime, relay: RelayTarget | None = None,
                       lease: timedelta | None = None) -> Posted:
    """Continue a conversation (``202``); a retry of the same message adds nothing (PAP-7.3-01).

    ``relay``: the relay mode's endpoint; the message's relay is written and claimed with it.
    ``lease``: its webhook messages are claimed with it too (as `start`'s).

    Raises:
        ConversationRefused: not the caller's (404/403), closed or a Direct Conversation open
            (409), or the ID reused for another message (409).
    """
    scope = user_scope(caller)
    digest = message_digest(message)
    async with conn.transaction():
        conversation = await find(conn, tenant_id, conversation_id, lock=True)
        _refuse(check_owner(conversation.view() if conversation else None, caller))
        assert conversation is not None
        decision = replay_decision(await _known_message(conn, tenant_id, scope, message.id), digest,
                                   conversation_id=conversation_id)
        if isinstance(decision, ProtocolError):
            _refuse(decision)
        if decision == "replay":
            return Posted(conversation=conversation, replay=True, webhook_message_ids=[])
        _refuse(check_open(conversation.view()), conversation)
        if not await _claim_message(conn, tenant_id, scope, message.id, conversation_id=conversation_id,
                                    digest=digest, now=now):
            # Unreachable while the row is locked (the same conversation); another
            # conversation's message under this ID conflicts.
            _refuse(ProtocolError(ErrorCode.MESSAGE_ID_CONFLICT, "This message ID was used for another message."))
        return await _receive(conn, conversation, caller, message, now=now, relay=relay, lease=lease)


async def handoff(conn: asyncpg.Connection, tenant_id: str, caller: Caller, conversation_id: str, *,
                  now: datetime) -> Conversation:
    """The agent asks for a person (§7.9): ``queued``; ``202`` also when already asked for.

    A new request for a person writes the ``conversation.handoff_requested`` webhook message
    in the same transaction (the company's people hear of it; a repeated request does not).
    """
    async with conn.transaction():
        conversation = await find(conn, tenant_id, conversation_id, lock=True)
        _refuse(check_owner(conversation.view() if conversation else None, caller))
        assert conversation is not None
        _refuse(check_open(conversation.view()), conversation)
        change = on_handoff(conversation.view())
        if change is None:
            return conversation
        queued = await _apply(conn, conversation, change, now)
        await enqueue_event(conn, tenant_id, HANDOFF_REQUESTED, payload_for(HANDOFF_REQUESTED, {
            "conversation_id": queued.id, "parent_conversation_id": queued.parent_id,
            "session_id": caller.session_id, "client_id": caller.client_id, "user_id": caller.user_id,
            "account": caller.account, "requested_at": _iso(now), "responder": queued.responder,
            "status": queued.status, "sequence": queued.last_seq}), now)
        return queued


async def queue_for_person(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, *,
                           now: datetime) -> Conversation | None:
    """The company's side asks for a person (the relay failed, or the company's endpoint said so).

    ``queued``, as a handoff (§7.9), so the inbox lists it under *Waiting for a person* and
    the agent reads a ``state`` event; nothing changes when already queued, with a person
    or closed. Returns the conversation, None when unknown.
    """
    async with conn.transaction():
        conversation = await find(conn, tenant_id, conversation_id, lock=True)
        if conversation is None or conversation.status == "closed":
            return conversation
        change = on_handoff(conversation.view())
        return conversation if change is None else await _apply(conn, conversation, change, now)


async def close(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, *, now: datetime,
                caller: Caller | None = None) -> Conversation:
    """Close a conversation (§7.12), by its agent (``caller``) or the company (None).

    Closing a parent closes its open Direct Conversation first; closing a Direct Conversation
    adds ``direct_closed`` to its parent, which takes messages again. Closed stays closed.
    """
    async with conn.transaction():
        seen = await find(conn, tenant_id, conversation_id)
        if caller is not None:
            _refuse(check_owner(seen.view() if seen else None, caller))
        if seen is None:
            _refuse(ProtocolError(ErrorCode.CONVERSATION_NOT_FOUND, "No such conversation."))
        assert seen is not None
        parent = await find(conn, tenant_id, seen.parent_id, lock=True) if seen.parent_id else None
        conversation = await find(conn, tenant_id, conversation_id, lock=True)
        assert conversation is not None
        if conversation.direct_child_id is not None:
            child = await find(conn, tenant_id, conversation.direct_child_id, lock=True)
            if child is not None and (change := on_close(child.view())) is not None:
                await _apply(conn, child, change, now)
            conversation = await _apply(conn, conversation, Transition(
                status=conversation.status, responder=conversation.responder,
                events=({"type": "direct_closed", "conversation_id": conversation.direct_child_id},)),
                now, direct_child_id=None)
        change = on_close(conversation.view())
        if change is None:
            return conversation
        closed = await _apply(conn, conversation, change, now)
        if parent is not None and parent.direct_child_id == conversation_id:
            await _apply(conn, parent, Transition(status=parent.status, responder=parent.responder, events=(
                {"type": "direct_closed", "conversation_id": conversation_id},)), now, direct_child_id=None)
        return closed


def _company_open(conversation: Conversation | None) -> Conversation:
    if conversation is None:
        _refuse(ProtocolError(ErrorCode.CONVERSATION_NOT_FOUND, "No such conversation."))
    assert conversation is not None
    if conversation.status == "closed":
        _refuse(ProtocolError(ErrorCode.CONVERSATION_CLOSED, "This conversation is closed."))
    return conversation


async def company_message(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, *,
                          message_id: str | None, text: str | None, data: dict[str, Any] | None,
                          sender: Responder, done: bool, now: datetime,
                          sender_name: str | None = None,
                          operation: dict[str, Any] | None = None) -> tuple[Conversation, dict[str, Any]]:
    """The company's reply (``role: company``, ``sender`` agent or human, PAP-7.7-02).

    ``message_id`` makes it idempotent (unique per conversation): the same reply again is a
    no-op; another under the same ID is ``message_id_conflict``. ``sender_name`` (a person's
    display name, an additional member) tells the agent who wrote it. Returns the
    conversation and the message as recorded. ``operation``: an operation the company
    proposed for this agent and user (its wire form, checked by the caller), carried as the
    message's ``operation`` (OPS-4-01).
    """
    chosen = message_id or new_id("msg")
    message: dict[str, Any] = {"id": chosen}
    if text is not None:
        message["text"] = text
    if data is not None:
        message["data"] = data
    if sender_name:
        message["sender_name"] = sender_name[:MAX_RESPONDER_NAME]
    if operation is not None:
        message["operation"] = operation
    # The operation is part of what was said: the same ID with another operation is a conflict.
    digest = message_digest(IncomingMessage(id=chosen, sender=sender, text=text, data=data),
                            operation_id=None if operation is None else str(operation.get("operation_id")))
    async with conn.transaction():
        conversation = _company_open(await find(conn, tenant_id, conversation_id, lock=True))
        scope = f"company {conversation_id}"
        known = await _known_message(conn, tenant_id, scope, chosen)
        decision = replay_decision(known, digest, conversation_id=conversation_id)
        if isinstance(decision, ProtocolError):
            _refuse(decision)
        if decision == "replay":
            return conversation, {**message, "sender": sender, "role": "company"}
        await _claim_message(conn, tenant_id, scope, chosen, conversation_id=conversation_id, digest=digest, now=now)
        change = on_company_message(conversation.view(), message, sender=sender, done=done)
        updated = await _apply(conn, conversation, change, now)
        return updated, dict(change.events[0]["message"])


async def company_event(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, draft: dict[str, Any], *,
                        now: datetime) -> Conversation:
    """An ``authorization`` (§7.11) or ``user_requested`` event from the company's agent."""
    async with conn.transaction():
        conversation = _company_open(await find(conn, tenant_id, conversation_id, lock=True))
        return await _apply(conn, conversation, Transition(status=conversation.status,
                                                           responder=conversation.responder, events=(draft,)), now)


async def set_responder(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, responder: Responder, *,
                        now: datetime, responder_name: str | None = None) -> Conversation:
    """A person takes the conversation over, or hands it back to the agent (a ``state`` event).

    ``responder_name``: the person's display name, shown to the agent in the event.
    """
    async with conn.transaction():
        conversation = _company_open(await find(conn, tenant_id, conversation_id, lock=True))
        change = on_responder(conversation.view(), responder, name=responder_name)
        return conversation if change is None else await _apply(conn, conversation, change, now)


async def read_page(conn: asyncpg.Connection, conversation: Conversation, cursor: str | None, *,
                    limit: int = PAGE_SIZE) -> Page:
    """The events after ``cursor`` (from the first kept one without), ``limit`` at most.

    Cursors are event IDs, opaque to agents (PAP-7.5-02): one this conversation never issued
    is ``400 invalid_cursor``; one whose event retention forgot is ``410 cursor_expired``
    (PAP-7.5-04: the agent reads from the beginning). With nothing new the cursor is the
    request's own; the conversation's ID is its starting cursor.

    Raises:
        ConversationRefused: ``invalid_cursor`` or ``cursor_expired``.
    """
    after = 0
    if cursor is not None and cursor != conversation.id:
        row = await conn.fetchrow(
            "SELECT seq, payload IS NULL AS forgotten FROM conversation_events"
            " WHERE tenant_id = $1 AND conversation_id = $2 AND id = $3",
            conversation.tenant_id, conversation.id, cursor) if IDENTIFIER.fullmatch(cursor) else None
        if row is None:
            _refuse(ProtocolError(ErrorCode.INVALID_CURSOR, "This cursor was not issued for this conversation."))
        assert row is not None
        if row["forgotten"]:
            _refuse(ProtocolError(ErrorCode.CURSOR_EXPIRED, "The events after this cursor are no longer kept."))
        after = int(row["seq"])
    rows = await conn.fetch(
        "SELECT payload FROM conversation_events WHERE tenant_id = $1 AND conversation_id = $2 AND seq > $3"
        " AND payload IS NOT NULL ORDER BY seq LIMIT $4",
        conversation.tenant_id, conversation.id, after, limit + 1)
    events = [dict(r["payload"]) for r in rows[:limit]]
    last = events[-1]["id"] if events else (cursor if cursor is not None else conversation.id)
    return Page(events=events, cursor=last, has_more=len(rows) > limit)


async def forget_events(conn: asyncpg.Connection, tenant_id: str, conversation_id: str, *, keep_last: int,
                        now: datetime) -> int:
    """Forget all but the last ``keep_last`` kept events of one conversation (an operator's retention).

    Their IDs stay as tombstones: cursors at them are ``cursor_expired`` (§7.5). Returns how many.
    """
    return int((await conn.fetchval(
        "WITH cut AS (SELECT seq FROM conversation_events WHERE tenant_id = $1 AND conversation_id = $2"
        " AND payload IS NOT NULL ORDER BY seq DESC OFFSET $3)"
        " , done AS (UPDATE conversation_events e SET payload = NULL, forgotten_at = $4 FROM cut"
        " WHERE e.tenant_id = $1 AND e.conversation_id = $2 AND e.seq = cut.seq RETURNING 1)"
        " SELECT count(*) FROM done", tenant_id, conversation_id, max(keep_last, 0), now)) or 0)


async def forget_older_than(conn: asyncpg.Connection, tenant_id: str, before: datetime, *, now: datetime,
                            limit: int = 10_000) -> int:
    """Retention: forget a tenant's events written before ``before`` (at most ``limit`` at once).

    The last event of each conversation is kept, so a reader restarting from the beginning
    always finds where the conversation stands.
    """
    return int((await conn.fetchval(
        "WITH cut AS (SELECT e.conversation_id, e.seq FROM conversation_events e JOIN conversations c"
        " ON c.tenant_id = e.tenant_id AND c.id = e.conversation_id"
        " WHERE e.tenant_id = $1 AND e.payload IS NOT NULL AND e.created_at < $2 AND e.seq < c.last_seq LIMIT $4)"
        " , done AS (UPDATE conversation_events e SET payload = NULL, forgotten_at = $3 FROM cut"
        " WHERE e.tenant_id = $1 AND e.conversation_id = cut.conversation_id AND e.seq = cut.seq RETURNING 1)"
        " SELECT count(*) FROM done", tenant_id, before, now, limit)) or 0)


async def list_conversations(conn: asyncpg.Connection, tenant_id: str, *, status: str | None = None,
                             limit: int = 50) -> list[Conversation]:
    """A tenant's conversations, most recently changed first (the company's inbox)."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM conversations WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2)"  # noqa: S608 - constant column list
        " ORDER BY updated_at DESC, id DESC LIMIT $3", tenant_id, status, max(1, min(limit, 200)))
    return [Conversation(**dict(r)) for r in rows]
