"""The rules of PAP §7 as pure functions over values: no I/O, no clock of their own.

Each function cites the requirement it implements. The store (`store`) loads rows, asks
these functions what to do, and writes what they answer in one transaction.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

import msgspec
from frontdoor_protocol import ErrorCode, ProtocolError

__all__ = [
    "AUTHORIZATION_ERRORS",
    "MAX_DELTA_CHARS",
    "MAX_MESSAGE_BYTES",
    "MAX_REASON_CHARS",
    "MAX_SCOPE_CHARS",
    "MAX_RESPONDER_NAME",
    "MAX_WAIT_SECONDS",
    "PAGE_SIZE",
    "Caller",
    "ConversationView",
    "IncomingMessage",
    "Responder",
    "Status",
    "Transition",
    "authorization_event",
    "check_delta",
    "check_direct_parent",
    "check_open",
    "check_owner",
    "message_digest",
    "on_close",
    "on_company_message",
    "on_handoff",
    "on_responder",
    "on_user_message",
    "parse_message",
    "parse_wait",
    "replay_decision",
    "user_requested_event",
    "user_scope",
]

Status = Literal["working", "idle", "queued", "closed"]
Responder = Literal["agent", "human"]

IDENTIFIER = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
"""IDs, cursors and message IDs: the URL-safe base64 alphabet, 1 to 256 characters (PAP-7.2-03)."""

MAX_MESSAGE_BYTES = 16_384
"""The largest message (its JSON) a conversation accepts, from either side."""

MAX_WAIT_SECONDS = 30
"""The longest long poll: a larger ``wait`` is served as 30 seconds (GUIDE-pa-conv-01)."""

PAGE_SIZE = 50
"""Events per page; more are announced with ``has_more`` (PAP-7.5-03)."""

_LOCALE = re.compile(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
_ZONE = re.compile(r"^[A-Za-z_]+(/[A-Za-z0-9_+-]+)*$|^UTC$")


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """Who calls: the agent, its pairwise user, the Session, and its sign-in now."""

    client_id: str
    user_id: str
    session_id: str
    account: str | None = None
    scopes: frozenset[str] = frozenset()


class ConversationView(msgspec.Struct, frozen=True, kw_only=True):
    """What the rules need of a stored conversation."""

    id: str
    client_id: str
    user_id: str
    account_id: str | None
    parent_id: str | None
    direct_child_id: str | None
    status: Status
    responder: Responder


class IncomingMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A message as a personal agent sends it (PAP §7.4): its own ID, who wrote it, content."""

    id: str
    sender: Responder
    text: str | None = None
    data: dict[str, Any] | None = None
    context: dict[str, Any] | None = None

    def wire(self, role: Literal["user", "company"]) -> dict[str, Any]:
        """The message as it appears in a ``message`` event, with its ``role``."""
        out: dict[str, Any] = {"id": self.id, "sender": self.sender, "role": role}
        for name in ("text", "data", "context"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


class Transition(msgspec.Struct, frozen=True, kw_only=True):
    """What an action does: the new status and responder, and the events to append (drafts)."""

    status: Status
    responder: Responder
    events: tuple[dict[str, Any], ...] = ()


def _invalid(description: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_REQUEST, description)


def parse_message(raw: object, *, allow_context: bool = True,
                  max_bytes: int = MAX_MESSAGE_BYTES) -> IncomingMessage:
    """The ``message`` member of a request, checked.

    - PAP-7.2-03: the ID is the sender's choice; only its alphabet and length are checked.
    - PAP-7.4-01: at least one of ``text``, ``data`` or ``context``.
    - PAP-7.4-03: ``context.locale``, ``time_zone`` and ``user_available`` have their formats.
    - A caller never sets ``role``: Frontdoor does (``user`` for the agent's, ``company`` for replies).
    - At most ``max_bytes`` of JSON.

    Raises:
        ProtocolError: ``invalid_request``.
    """
    if not isinstance(raw, dict):
        raise _invalid("The body needs a message object.")
    if len(msgspec.json.encode(raw)) > max_bytes:
        raise _invalid(f"The message is larger than {max_bytes} bytes.")
    unknown = set(raw) - {"id", "sender", "text", "data", "context"}
    if "role" in unknown:
        raise _invalid("A message's role is set by the company, never by the sender.")
    message_id, sender = raw.get("id"), raw.get("sender")
    if not isinstance(message_id, str) or not IDENTIFIER.fullmatch(message_id):
        raise _invalid("message.id must be 1 to 256 URL-safe base64 characters.")
    if sender not in ("agent", "human"):
        raise _invalid("message.sender must be agent or human.")
    text, data, context = raw.get("text"), raw.get("data"), raw.get("context")
    if text is not None and not isinstance(text, str):
        raise _invalid("message.text must be a string.")
    if data is not None and not isinstance(data, dict):
        raise _invalid("message.data must be an object.")
    if context is not None:
        if not allow_context or not isinstance(context, dict):
            raise _invalid("message.context must be an object.")
        _check_context(context)
    if text is None and data is None and context is None:
        raise _invalid("A message needs text, data or context.")
    return IncomingMessage(id=message_id, sender=sender, text=text, data=data, context=context)


def _check_context(context: dict[str, Any]) -> None:
    locale, zone, available = context.get("locale"), context.get("time_zone"), context.get("user_available")
    if locale is not None and (not isinstance(locale, str) or not _LOCALE.fullmatch(locale)):
        raise _invalid("context.locale must be a language tag such as en-US.")
    if zone is not None and (not isinstance(zone, str) or len(zone) > 64 or not _ZONE.fullmatch(zone)):
        raise _invalid("context.time_zone must be an IANA time zone name.")
    if available is not None and not isinstance(available, bool):
        raise _invalid("context.user_available must be true or false.")


def message_digest(message: IncomingMessage, *, parent_id: str | None = None, operation_id: str | None = None) -> str:
    """What a retry must repeat exactly: the message's members (the parent it opens under, the operation it carries)."""
    members: dict[str, Any] = {"m": msgspec.to_builtins(message), "p": parent_id}
    if operation_id is not None:  # absent otherwise: digests stored before operations stay valid
        members["o"] = operation_id
    canonical = msgspec.json.encode(members, order="sorted")
    return hashlib.sha256(canonical).hexdigest()


def user_scope(caller: Caller) -> str:
    """Where a personal agent's message IDs must be unique: its agent and pairwise user (PAP-7.3-01)."""
    return f"user {caller.client_id} {caller.user_id}"


def replay_decision(known: tuple[str, str] | None, digest: str, *,
                    conversation_id: str | None = None) -> Literal["new", "replay"] | ProtocolError:
    """A message ID seen before: the same message is a retry; anything else conflicts (PAP-7.3-01).

    Args:
        known: The stored (conversation ID, digest) of this message ID, if any.
        digest: This request's `message_digest`.
        conversation_id: The conversation the request names (None for a start).
    """
    if known is None:
        return "new"
    stored_conversation, stored_digest = known
    if stored_digest != digest or (conversation_id is not None and conversation_id != stored_conversation):
        return ProtocolError(ErrorCode.MESSAGE_ID_CONFLICT, "This message ID was used for another message.")
    return "replay"


def check_owner(conversation: ConversationView | None, caller: Caller) -> ProtocolError | None:
    """May ``caller`` use this conversation?

    - PAP-7.2-01: only its agent (client_id) and pairwise user; another's is answered like an
      unknown one (GUIDE-co-errors-01), ``404 conversation_not_found``.
    - Once it used an account it belongs to that account: a signed-out Session is asked to sign
      in (``403 sign_in_required``, GUIDE-co-conv-02, the conversation stays open); another
      account's Session is ``404`` like a stranger.
    """
    not_found = ProtocolError(ErrorCode.CONVERSATION_NOT_FOUND, "No such conversation.")
    if conversation is None or (conversation.client_id, conversation.user_id) != (caller.client_id, caller.user_id):
        return not_found
    if conversation.account_id is not None and caller.account != conversation.account_id:
        if caller.account is None:
            return ProtocolError(ErrorCode.SIGN_IN_REQUIRED, "Sign in to continue this conversation.")
        return not_found
    return None


def check_open(conversation: ConversationView) -> ProtocolError | None:
    """A message or handoff goes only to an open conversation with no Direct Conversation open.

    ``409 conversation_closed`` (§7.12); ``409 direct_conversation_open`` (§7.10), whose body
    names the open one (the caller adds ``conversation_id``).
    """
    if conversation.status == "closed":
        return ProtocolError(ErrorCode.CONVERSATION_CLOSED, "This conversation is closed.")
    if conversation.direct_child_id is not None:
        return ProtocolError(ErrorCode.DIRECT_CONVERSATION_OPEN, "A Direct Conversation is open under this one.")
    return None


def check_direct_parent(parent: ConversationView | None, caller: Caller) -> ProtocolError | None:
    """PAP-7.10-01: the parent must be the caller's, open, and not a Direct Conversation itself.

    A Direct Conversation named as a parent is answered as unknown (``404``); one already
    open under the parent is ``409 direct_conversation_open``.
    """
    owned = check_owner(parent, caller)
    if owned is not None:
        return owned
    assert parent is not None
    if parent.parent_id is not None:
        return ProtocolError(ErrorCode.CONVERSATION_NOT_FOUND, "No such conversation.")
    return check_open(parent)


def _state(status: Status, responder: Responder) -> dict[str, Any]:
    return {"type": "state", "status": status, "responder": responder}


def on_user_message(conversation: ConversationView, message: IncomingMessage) -> Transition:
    """The agent's message is appended (``role: user``, its ``sender`` kept, PAP-7.8-01).

    With the company agent responding the status becomes ``working`` (a ``state`` event, §7.7);
    a person at the company, or a queue for one, keeps the status as it is.
    """
    events: list[dict[str, Any]] = [{"type": "message", "message": message.wire("user")}]
    status = conversation.status
    if conversation.responder == "agent" and status in ("idle", "working"):
        if status != "working":
            events.append(_state("working", "agent"))
        status = "working"
    return Transition(status=status, responder=conversation.responder, events=tuple(events))


def on_company_message(conversation: ConversationView, message: dict[str, Any], *,
                       sender: Responder, done: bool = True) -> Transition:
    """A reply (``role: company``) with its ``sender`` (PAP-7.7-02): who at the company wrote it.

    ``done`` ends the turn: a ``working`` conversation becomes ``idle``.
    """
    events: list[dict[str, Any]] = [{"type": "message", "message": {**message, "sender": sender, "role": "company"}}]
    status = conversation.status
    if done and status == "working":
        status = "idle"
        events.append(_state("idle", conversation.responder))
    return Transition(status=status, responder=conversation.responder, events=tuple(events))


def on_handoff(conversation: ConversationView) -> Transition | None:
    """The agent asks for a person (§7.9): ``queued`` until one takes over; None when nothing changes.

    Already queued, or already with a person: answered ``202`` as it is.
    """
    if conversation.status == "queued" or conversation.responder == "human":
        return None
    return Transition(status="queued", responder=conversation.responder,
                      events=(_state("queued", conversation.responder),))


MAX_RESPONDER_NAME = 60
"""The longest display name of a person at the company shown to agents (``responder_name``)."""


def on_responder(conversation: ConversationView, responder: Responder, *,
                 name: str | None = None) -> Transition | None:
    """A person takes over (``responder: human``) or hands back to the agent; None if unchanged.

    The status becomes ``idle``: whoever answers now has the turn. A person taking over may
    be named in the ``state`` event (``responder_name``, an addition §7 allows: agents keep
    unknown members), so the agent can tell the user who answers; the name is a display
    name the person chose, never their sign-in email. A second person taking over a
    conversation already with a person is a change too (the name changes).
    """
    named = name if responder == "human" and name else None
    if conversation.responder == responder and conversation.status != "queued" and named is None:
        return None
    event = _state("idle", responder)
    if named is not None:
        event["responder_name"] = named[:MAX_RESPONDER_NAME]
    return Transition(status="idle", responder=responder, events=(event,))


def on_close(conversation: ConversationView) -> Transition | None:
    """Close (§7.12): a last ``state`` event; None when already closed. Its events stay readable."""
    if conversation.status == "closed":
        return None
    return Transition(status="closed", responder=conversation.responder,
                      events=(_state("closed", conversation.responder),))


MAX_DELTA_CHARS = 4000
"""The most text one ``text-delta`` carries."""

MAX_SCOPE_CHARS = 1000
"""The longest ``scope`` an ``authorization`` event names."""

AUTHORIZATION_ERRORS = ("sign_in_required", "insufficient_scope")
"""Why the agent must sign the user in (§7.11): not signed in, or without the scope."""


def check_delta(message_id: object, text: object) -> str | None:
    """Why a company's ``text-delta`` cannot be shown (None: it can), §7.6.

    A delta is a piece of a reply being written, for display only: agents never act on it
    (PAP-7.6-01) and it is never stored in the event log, only shown to streaming readers
    before the complete message. It names the reply's message ID (the alphabet of
    PAP-7.2-03) and carries 1 to `MAX_DELTA_CHARS` characters.
    """
    if not isinstance(message_id, str) or not IDENTIFIER.fullmatch(message_id):
        return "message_id must be 1 to 256 URL-safe base64 characters"
    if not isinstance(text, str) or not text or len(text) > MAX_DELTA_CHARS:
        return f"text must be 1 to {MAX_DELTA_CHARS} characters"
    return None


def authorization_event(scope: object, error: object = "sign_in_required") -> dict[str, Any] | str:
    """The ``authorization`` event the company's agent asks for (§7.11), or why it cannot be added.

    PAP-7.11-01: when the company agent needs the user's account it adds this event, naming
    the scopes (space-separated) the personal agent must sign the user in for, and ``error``
    (`AUTHORIZATION_ERRORS`); it should also say so in a message.
    """
    if not isinstance(scope, str) or not scope.strip() or len(scope) > MAX_SCOPE_CHARS:
        return f"scope must name the scopes to sign in for, space-separated, at most {MAX_SCOPE_CHARS} characters"
    if error not in AUTHORIZATION_ERRORS:
        return "error must be sign_in_required or insufficient_scope"
    return {"type": "authorization", "error": error, "scope": scope}


MAX_REASON_CHARS = 1000
"""The longest ``reason`` a ``user_requested`` event gives."""


def user_requested_event(reason: object) -> dict[str, Any] | str:
    """The ``user_requested`` event the company's agent adds (§7), or why it cannot be added.

    The company needs the user themselves (not their agent): ``reason`` says why, 1 to
    `MAX_REASON_CHARS` characters, not only spaces. The same rule for the company API and a
    relay answer's events.
    """
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
        return f"reason must be 1 to {MAX_REASON_CHARS} characters"
    return {"type": "user_requested", "reason": reason}


def parse_wait(raw: str | None) -> int | ProtocolError:
    """``wait`` of a read: a non-negative integer of seconds, at most `MAX_WAIT_SECONDS` served."""
    if raw is None or raw == "":
        return 0
    if not raw.isdigit() or len(raw) > 6:
        return _invalid("wait must be a non-negative integer of seconds.")
    return min(int(raw), MAX_WAIT_SECONDS)
