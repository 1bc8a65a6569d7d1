"""The human handoff inbox: the company's people answering hosted conversations (#16).

The dashboard lists the conversations waiting for a person (an agent asked for one, §7.9,
or the company asked for the user, ``user_requested``), those a person answers, those
assigned to the signed-in member, every open one and the closed ones. A member takes a
conversation over (``responder: human``, the ``state`` event naming their display name),
replies (``sender: human`` with ``sender_name``), hands it back to the company's agent or
closes it, and assigns it to a team member. Each use case is one transaction, checks the
actor's role and writes the audit row; the caller publishes the wake-up after the commit
(`wakeups.publish_changed`) so agents reading by long poll or stream see it at once.

Agents see a member's *display name*, chosen in the inbox (1 to 60 characters, never an
email address); until one is chosen, the company's name followed by "support".
Audit rows name the conversation and the message ID, never what anyone wrote.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final, Literal

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.roles import can, require

from . import store
from .rules import MAX_MESSAGE_BYTES, MAX_RESPONDER_NAME
from .store import _COLUMNS, Conversation, ConversationRefused

__all__ = [
    "INBOX_VIEWS",
    "InboxItem",
    "Transcript",
    "assign",
    "assignment",
    "close",
    "default_display_name",
    "display_name",
    "get",
    "hand_back",
    "list_inbox",
    "queue_count",
    "reply",
    "session_conversations",
    "set_display_name",
    "take_over",
    "transcript",
]

InboxView = Literal["queue", "human", "mine", "open", "closed"]
INBOX_VIEWS: Final[tuple[InboxView, ...]] = ("queue", "human", "mine", "open", "closed")

_USER_REQUESTED = ("EXISTS (SELECT 1 FROM conversation_events e WHERE e.tenant_id = c.tenant_id"
                   " AND e.conversation_id = c.id AND e.type = 'user_requested' AND e.payload IS NOT NULL)")
# Constant SQL per view (nothing from the request is ever spliced in).
_WHERE: Final[dict[str, str]] = {
    "queue": f"(c.status = 'queued' OR (c.status <> 'closed' AND c.responder = 'agent' AND {_USER_REQUESTED}))",
    "human": "c.status <> 'closed' AND c.responder = 'human'",
    "mine": "c.status <> 'closed' AND a.admin_id = $2",
    "open": "c.status <> 'closed'",
    "closed": "c.status = 'closed'",
}
_C_COLUMNS = ", ".join("c." + name.strip() for name in _COLUMNS.split(","))
_NAME_FORBIDDEN = re.compile(r"[@<>\x00-\x1f\x7f]")
MAX_REPLY_CHARS: Final = 4000
TRANSCRIPT_LIMIT: Final = 500


class InboxItem(msgspec.Struct, frozen=True, kw_only=True):
    """A conversation as the inbox lists it."""

    conversation: Conversation
    assignee_id: str | None
    assignee_email: str | None
    user_requested: bool


class Transcript(msgspec.Struct, frozen=True, kw_only=True):
    """A conversation's kept events in order, and how many retention forgot before them."""

    events: list[dict[str, Any]]
    forgotten: int
    truncated: bool


def _not_found() -> NotFound:
    return NotFound("conversation_not_found", "No such conversation.")


def _domain(exc: ConversationRefused) -> Exception:
    code = str(exc.error.code)
    if exc.error.status == 404:
        return _not_found()
    return Conflict(code, exc.error.description or "Refused.")


def default_display_name(organization_name: str) -> str:
    """What agents see until a member chooses a display name."""
    return (organization_name.strip()[: MAX_RESPONDER_NAME - 8].strip() or "The company") + " support"


def _check_name(raw: str) -> str:
    name = " ".join(raw.split())
    if not 1 <= len(name) <= MAX_RESPONDER_NAME:
        raise Invalid("invalid_display_name", f"A display name has 1 to {MAX_RESPONDER_NAME} characters.",
                      fields={"display_name": f"1 to {MAX_RESPONDER_NAME} characters"})
    if _NAME_FORBIDDEN.search(name):
        raise Invalid("invalid_display_name", "A display name is a name, not an email address (no @, < or >).",
                      fields={"display_name": "no @, < or >"})
    return name


async def display_name(conn: asyncpg.Connection, tenant_id: str, admin_id: str) -> str | None:
    """The member's chosen display name, or None."""
    value = await conn.fetchval("SELECT display_name FROM conversation_responder_names"
                                " WHERE tenant_id = $1 AND admin_id = $2", tenant_id, admin_id)
    return None if value is None else str(value)


async def set_display_name(conn: asyncpg.Connection, actor: Actor, raw: str, *, now: datetime) -> str:
    """Choose the name agents see when ``actor`` answers (their own; audited).

    Raises:
        Invalid: ``invalid_display_name``.
        Forbidden: a viewer (they never answer).
    """
    require(actor, "write")
    assert actor.id is not None
    name = _check_name(raw)
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO conversation_responder_names (tenant_id, admin_id, display_name, updated_at)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, admin_id)"
            " DO UPDATE SET display_name = EXCLUDED.display_name, updated_at = EXCLUDED.updated_at",
            actor.tenant_id, actor.id, name, now)
        await audit.record(conn, actor, "conversation.display_name_set", target_type="admin", target_id=actor.id,
                           details={"display_name": name}, at=now)
    return name


async def list_inbox(conn: asyncpg.Connection, tenant_id: str, *, view: str, admin_id: str | None,
                     limit: int = 100) -> list[InboxItem]:
    """One view of the inbox, most recently changed first.

    Raises:
        Invalid: an unknown ``view``.
    """
    where = _WHERE.get(view)
    if where is None:
        raise Invalid("invalid_view", "Unknown inbox view.")
    rows = await conn.fetch(
        f"SELECT {_C_COLUMNS}, a.admin_id AS assignee_id, m.email AS assignee_email,"  # noqa: S608 - constant SQL
        f" {_USER_REQUESTED} AS user_requested FROM conversations c"
        " LEFT JOIN conversation_assignments a ON a.tenant_id = c.tenant_id AND a.conversation_id = c.id"
        " LEFT JOIN admins m ON m.tenant_id = a.tenant_id AND m.id = a.admin_id"
        # $2 (the member, for "mine") is typed here so that every view takes the same parameters.
        f" WHERE c.tenant_id = $1 AND ($2::text IS NULL OR true) AND {where}"
        " ORDER BY c.updated_at DESC, c.id DESC LIMIT $3", tenant_id, admin_id, max(1, min(limit, 200)))
    items = []
    for row in rows:
        record = dict(row)
        extra = {k: record.pop(k) for k in ("assignee_id", "assignee_email", "user_requested")}
        items.append(InboxItem(conversation=Conversation(**record), **extra))
    return items


async def queue_count(conn: asyncpg.Connection, tenant_id: str) -> int:
    """How many conversations wait for a person (the inbox's badge)."""
    return int(await conn.fetchval(
        f"SELECT count(*) FROM conversations c WHERE c.tenant_id = $1 AND {_WHERE['queue']}",  # noqa: S608 - constant SQL
        tenant_id) or 0)


async def assignment(conn: asyncpg.Connection, tenant_id: str, conversation_id: str) -> tuple[str, str] | None:
    """The assigned member's (ID, email), or None."""
    row = await conn.fetchrow(
        "SELECT a.admin_id, m.email FROM conversation_assignments a JOIN admins m"
        " ON m.tenant_id = a.tenant_id AND m.id = a.admin_id WHERE a.tenant_id = $1 AND a.conversation_id = $2",
        tenant_id, conversation_id)
    return None if row is None else (row["admin_id"], row["email"])


async def _conversation(conn: asyncpg.Connection, tenant_id: str, conversation_id: str) -> Conversation:
    found = await store.find(conn, tenant_id, conversation_id)
    if found is None:
        raise _not_found()
    return found


async def _assign(conn: asyncpg.Connection, actor: Actor, conversation_id: str, admin_id: str,
                  now: datetime) -> None:
    await conn.execute(
        "INSERT INTO conversation_assignments (tenant_id, conversation_id, admin_id, assigned_by, assigned_at)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, conversation_id)"
        " DO UPDATE SET admin_id = EXCLUDED.admin_id, assigned_by = EXCLUDED.assigned_by,"
        " assigned_at = EXCLUDED.assigned_at", actor.tenant_id, conversation_id, admin_id, actor.id, now)


async def assign(conn: asyncpg.Connection, actor: Actor, conversation_id: str, admin_id: str | None, *,
                 now: datetime) -> str | None:
    """Assign the conversation to a member who can answer (owner or admin), or unassign (None).

    Raises:
        NotFound: no such conversation, or no such member in this tenant (``member_not_found``).
        Invalid: a viewer cannot answer (``member_cannot_answer``).
    """
    require(actor, "write")
    async with conn.transaction():
        conversation = await _conversation(conn, actor.tenant_id, conversation_id)
        if admin_id is None:
            await conn.execute("DELETE FROM conversation_assignments WHERE tenant_id = $1 AND conversation_id = $2",
                               actor.tenant_id, conversation.id)
        else:
            role = await conn.fetchval("SELECT role FROM admins WHERE tenant_id = $1 AND id = $2",
                                       actor.tenant_id, admin_id)
            if role is None:
                raise NotFound("member_not_found", "No such team member.")
            if not can(role, "write"):
                raise Invalid("member_cannot_answer", "A viewer cannot answer conversations.")
            await _assign(conn, actor, conversation.id, admin_id, now)
        await audit.record(conn, actor, "conversation.assigned", target_type="conversation",
                           target_id=conversation.id, details={"admin_id": admin_id}, at=now)
    return admin_id


async def _name_of(conn: asyncpg.Connection, actor: Actor, organization_name: str) -> str:
    assert actor.id is not None
    return await display_name(conn, actor.tenant_id, actor.id) or default_display_name(organization_name)


async def take_over(conn: asyncpg.Connection, actor: Actor, conversation_id: str, *, organization_name: str,
                    now: datetime) -> Conversation:
    """``actor`` answers from now on: ``responder: human`` named by their display name, assigned to them.

    Raises:
        NotFound: no such conversation. Conflict: ``conversation_closed``.
    """
    require(actor, "write")
    assert actor.id is not None
    async with conn.transaction():
        name = await _name_of(conn, actor, organization_name)
        try:
            conversation = await store.set_responder(conn, actor.tenant_id, conversation_id, "human",
                                                     now=now, responder_name=name)
        except ConversationRefused as exc:
            raise _domain(exc) from None
        await _assign(conn, actor, conversation.id, actor.id, now)
        await audit.record(conn, actor, "conversation.taken_over", target_type="conversation",
                           target_id=conversation.id, at=now)
    return conversation


async def hand_back(conn: asyncpg.Connection, actor: Actor, conversation_id: str, *, now: datetime) -> Conversation:
    """The company's agent answers again (``responder: agent``).

    Raises:
        NotFound: no such conversation. Conflict: ``conversation_closed``.
    """
    require(actor, "write")
    async with conn.transaction():
        try:
            conversation = await store.set_responder(conn, actor.tenant_id, conversation_id, "agent", now=now)
        except ConversationRefused as exc:
            raise _domain(exc) from None
        await audit.record(conn, actor, "conversation.handed_back", target_type="conversation",
                           target_id=conversation.id, at=now)
    return conversation


async def reply(conn: asyncpg.Connection, actor: Actor, conversation_id: str, text: str, *, organization_name: str,
                now: datetime, message_id: str | None = None) -> tuple[Conversation, dict[str, Any]]:
    """A person's reply (``role: company``, ``sender: human``, ``sender_name``; the turn ends).

    Only while a person answers (take it over first). ``message_id`` (the form's) makes a
    double submit one message.

    Raises:
        Invalid: ``invalid_reply`` (empty or too long). Conflict: ``not_taken_over``,
        ``conversation_closed``, ``message_id_conflict``. NotFound: no such conversation.
    """
    require(actor, "write")
    body = text.strip()
    if not body or len(body) > MAX_REPLY_CHARS or len(body.encode()) > MAX_MESSAGE_BYTES - 512:
        raise Invalid("invalid_reply", f"A reply has 1 to {MAX_REPLY_CHARS} characters.",
                      fields={"text": f"1 to {MAX_REPLY_CHARS} characters"})
    async with conn.transaction():
        conversation = await _conversation(conn, actor.tenant_id, conversation_id)
        if conversation.status != "closed" and conversation.responder != "human":
            raise Conflict("not_taken_over", "Take the conversation over before you reply.")
        name = await _name_of(conn, actor, organization_name)
        try:
            updated, message = await store.company_message(
                conn, actor.tenant_id, conversation.id, message_id=message_id or new_id("msg"), text=body,
                data=None, sender="human", done=True, now=now, sender_name=name)
        except ConversationRefused as exc:
            raise _domain(exc) from None
        if updated.last_seq != conversation.last_seq:  # a double submit (same message ID) is not a second reply
            await audit.record(conn, actor, "conversation.replied", target_type="conversation",
                               target_id=updated.id, details={"message_id": message["id"]}, at=now)
    return updated, message


async def close(conn: asyncpg.Connection, actor: Actor, conversation_id: str, *, now: datetime) -> Conversation:
    """Close the conversation (and a Direct Conversation open under it); closed stays closed."""
    require(actor, "write")
    async with conn.transaction():
        try:
            conversation = await store.close(conn, actor.tenant_id, conversation_id, now=now)
        except ConversationRefused as exc:
            raise _domain(exc) from None
        await audit.record(conn, actor, "conversation.closed", target_type="conversation",
                           target_id=conversation.id, at=now)
    return conversation


async def get(conn: asyncpg.Connection, tenant_id: str, conversation_id: str) -> Conversation:
    """The tenant's conversation.

    Raises:
        NotFound: ``conversation_not_found`` (another tenant's is unknown too).
    """
    return await _conversation(conn, tenant_id, conversation_id)


async def transcript(conn: asyncpg.Connection, conversation: Conversation, *,
                     limit: int = TRANSCRIPT_LIMIT) -> Transcript:
    """The kept events in order (the newest ``limit``), and how many retention forgot."""
    rows = await conn.fetch(
        "SELECT payload FROM (SELECT seq, payload FROM conversation_events WHERE tenant_id = $1"
        " AND conversation_id = $2 AND payload IS NOT NULL ORDER BY seq DESC LIMIT $3) kept ORDER BY seq",
        conversation.tenant_id, conversation.id, limit + 1)
    forgotten = int(await conn.fetchval(
        "SELECT count(*) FROM conversation_events WHERE tenant_id = $1 AND conversation_id = $2 AND payload IS NULL",
        conversation.tenant_id, conversation.id) or 0)
    events = [dict(r["payload"]) for r in rows]
    return Transcript(events=events[-limit:], forgotten=forgotten, truncated=len(events) > limit)


async def session_conversations(conn: asyncpg.Connection, tenant_id: str, session_id: str, *,
                                limit: int = 20) -> list[Conversation]:
    """The conversations a Session started, oldest first (its page shows their transcripts)."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM conversations WHERE tenant_id = $1 AND session_id = $2"  # noqa: S608 - constant SQL
        " ORDER BY created_at, id LIMIT $3", tenant_id, session_id, limit)
    return [Conversation(**dict(r)) for r in rows]
