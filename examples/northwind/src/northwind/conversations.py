"""Northwind's company agent: the PAP conversation endpoint (§7) at ``/poppy/conversations``.

A personal agent starts a conversation with ``POST /poppy/conversations`` and a message
``{"id", "sender", "text"}``, continues it with ``POST /poppy/conversations/{id}/messages``,
reads its events with ``GET /poppy/conversations/{id}/events?cursor=``, asks for a person
with ``.../handoff`` and ends it with ``.../close``. Every request carries a Session Token
(checked by the sdk's middleware, no scope needed: signed-out Sessions may talk), and a
conversation belongs to the agent and user that started it, ``(client_id, user_id)``.

The rules that matter to an agent:

- Message IDs are the agent's, unique for the user: sending the same message again returns
  what the first send did and adds nothing; another message with a used ID is 409
  ``message_id_conflict``.
- Northwind replies before answering the POST, so the answer already holds the reply and
  status is ``idle`` (``closed`` once closed); there is never anything to wait for.
- Cursors are opaque to the agent. An unknown one is 400 ``invalid_cursor``; one for
  events Northwind no longer keeps is 410 ``cursor_expired``.
- Another user's conversation is 404 ``conversation_not_found``, exactly like an unknown one.
- Northwind has no people on this channel: a handoff is answered by the agent, saying so.
- A Direct Conversation (``parent_conversation_id``, §7.10) holds its parent: the parent
  refuses messages with 409 ``direct_conversation_open`` until it is closed.

With operations on, a message asking to **reorder** (from a Session signed in with
``orders:read``) proposes reordering the latest order through the same
:class:`northwind.ordering.Ordering` as the API and the MCP tool (the same ``action_key``, so
the same operation), and the reply carries it in the message's ``operation`` field. A
message never confirms anything: the agent confirms at the operations endpoint.

The agent's text is data: the rules below only look for a word in it, never quote it or
follow it. No account data is ever put in a conversation, so signing out or switching
accounts cannot expose one through it. Conversations live in memory, bounded; a real
company keeps them in its database, with a unique key on ``(client_id, user_id, message ID)``.
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Final, Literal

import msgspec
from frontdoor_sdk import Caller, LedgerError, LedgerRefused
from litestar import MediaType, Request, Response, Router, get, post
from litestar.exceptions import ValidationException

from northwind import catalog
from northwind.ordering import InvalidOrder, Ordering
from northwind.protection import ORDERS_READ, verified_caller

PAGE_SIZE: Final = 50
MAX_CONVERSATIONS: Final = 1_000
"""Conversations kept; the least recently used is forgotten first."""
MAX_EVENTS: Final = 200
"""Events kept per conversation; older ones are forgotten (their cursors expire)."""
MAX_BODY: Final = 8_192
"""Largest request body, in bytes: a message is a chat turn, not a document."""

Identifier = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,256}$")]
Owner = tuple[str, str]
"""``(client_id, user_id)`` of the verified caller."""
AuthorizationError = Literal["sign_in_required", "insufficient_scope"]
Status = Literal["queued", "idle", "closed"]


# --- what goes over the wire ------------------------------------------------------------


class Message(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A message of either side (§7.4). ``role`` is set by Northwind, never by the sender."""

    id: Identifier
    sender: Literal["agent", "human"]
    role: Literal["user", "company"] | None = None
    text: Annotated[str, msgspec.Meta(max_length=4_000)] | None = None
    data: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    operation: dict[str, Any] | None = None  # set by Northwind only: an operation it proposed


class Posted(msgspec.Struct, frozen=True, kw_only=True):
    """The body of a POST that sends a message."""

    message: Message
    parent_conversation_id: Identifier | None = None


class Event(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One event of a conversation (§7.5)."""

    id: str
    type: Literal["message", "authorization", "state", "direct_opened", "direct_closed"]
    created_at: datetime
    message: Message | None = None
    error: AuthorizationError | None = None  # authorization
    scope: str | None = None  # authorization
    status: Status | None = None  # state
    responder: Literal["agent"] | None = None  # state
    conversation_id: str | None = None  # direct_opened, direct_closed: the Direct Conversation


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """What a read (and a POST) answers: events in order, and where to read from next."""

    conversation_id: str
    events: list[Event]
    cursor: str
    has_more: bool
    status: Status
    responder: Literal["agent"] = "agent"  # Northwind has no people on this channel


class Receipt(msgspec.Struct, frozen=True, kw_only=True):
    """What closing and handoff answer."""

    conversation_id: str
    status: Status
    responder: Literal["agent"] = "agent"


class Refused(Exception):
    """A refusal, answered as ``{"error": code, **details}`` with its HTTP status."""

    def __init__(self, status: int, code: str, **details: str) -> None:
        super().__init__(code)
        self.status, self.code, self.details = status, code, details


# --- the company agent ------------------------------------------------------------------

_PRODUCTS: Final = ", ".join(product.name for product in catalog.PRODUCTS)


def reply_to(text: str, caller: Caller) -> tuple[str, AuthorizationError | None]:
    """Northwind's answer to a message, and the sign-in it asks for, if any (§7.11).

    Deterministic rules on the text as data: it is searched for a word, never quoted or obeyed.
    """
    if "order" in text.casefold():
        if caller.has_scopes(ORDERS_READ):
            return (
                "You're signed in: your agent can list your orders with GET /api/orders or the MCP tool list_orders.",
                None,
            )
        error: AuthorizationError = "insufficient_scope" if caller.signed_in else "sign_in_required"
        return (
            f"Orders belong to your Northwind account: please sign in and allow {ORDERS_READ}. "
            "Then your agent can list them with GET /api/orders or the MCP tool list_orders.",
            error,
        )
    return (
        f"Hello from Northwind's support agent. We sell {_PRODUCTS}: search them with "
        "GET /api/products or the MCP tool search_products. Ask me about your orders, too.",
        None,
    )


def asks_to_reorder(text: str) -> bool:
    """Whether a message asks Northwind to order an earlier order again (a word, never obeyed)."""
    return "reorder" in text.casefold()


@dataclass(frozen=True)
class Proposal:
    """What a message that asked for an order led to: the reply and the operation, if one was proposed."""

    text: str
    operation: dict[str, Any] | None = None


async def propose_reorder(ordering: Ordering, caller: Caller) -> Proposal:
    """Propose reordering the caller's latest order, as ``POST /api/orders/reorder`` does."""
    try:
        operation = await ordering.reorder(caller)
    except InvalidOrder:
        return Proposal("There is no earlier order in your account to reorder.")
    except LedgerRefused as refused:
        if refused.code == "extension_required":
            return Proposal("To order through Northwind your agent needs the PAP operations extension.")
        return Proposal("I could not propose that order. Please try again later.")
    except LedgerError:
        return Proposal("I could not propose that order just now. Please try again shortly.")
    return Proposal(
        f"I've proposed this, and nothing is ordered yet: {operation.get('summary', '')} "
        "Your agent can confirm the operation at Northwind's operations endpoint once you approve it.",
        operation,
    )


# --- the store --------------------------------------------------------------------------

_CURSOR: Final = re.compile(r"evt_(0|[1-9][0-9]{0,8})")


@dataclass
class Conversation:
    """One conversation: its last :data:`MAX_EVENTS` events, numbered from 1."""

    conversation_id: str
    owner: Owner
    parent_id: str | None = None
    """Set on a Direct Conversation: the conversation it was opened under."""
    direct_id: str | None = None
    """The Direct Conversation open under this one, if any."""
    events: list[Event] = field(default_factory=list)
    forgotten: int = 0
    """How many events were dropped from the front."""
    messages: dict[str, tuple[Message, int]] = field(default_factory=dict)
    """The agent's messages still kept, by ID: the message and its event's number."""
    closed: bool = False

    @property
    def last(self) -> int:
        return self.forgotten + len(self.events)

    def after(self, cursor: str | None) -> int:
        """The number of the last event a reader holding ``cursor`` has seen (0: none)."""
        if cursor is None:
            return 0
        match = _CURSOR.fullmatch(cursor)
        if match is None or int(match[1]) > self.last:
            raise Refused(400, "invalid_cursor")
        if int(match[1]) < self.forgotten:
            raise Refused(410, "cursor_expired")
        return int(match[1])

    def page(self, after: int) -> Page:
        """Up to :data:`PAGE_SIZE` events after event number ``after``."""
        start = max(after - self.forgotten, 0)
        events = self.events[start : start + PAGE_SIZE]
        return Page(
            conversation_id=self.conversation_id,
            events=events,
            # The cursor is the last event's ID: the reader reads on after it.
            cursor=events[-1].id if events else f"evt_{after}",
            has_more=start + PAGE_SIZE < len(self.events),
            status="closed" if self.closed else "idle",
        )

    def check_open(self) -> None:
        """Refuse a message or handoff to a closed conversation or one with a Direct one open."""
        if self.closed:
            raise Refused(409, "conversation_closed")
        if self.direct_id is not None:
            raise Refused(409, "direct_conversation_open", conversation_id=self.direct_id)


class ConversationStore:
    """Northwind's conversations, in memory. Every method takes the verified caller."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()
        self._message_ids: dict[tuple[str, str, str], str] = {}
        """``(client_id, user_id, message ID)`` to the conversation the message went to."""

    def is_replay(self, caller: Caller, message: Message) -> bool:
        """Whether ``message`` was sent before (its answer is replayed, nothing is proposed)."""
        return self._replayed(caller, message) is not None

    def start(self, caller: Caller, message: Message, parent_id: str | None, proposal: Proposal | None = None) -> Page:
        """Start a conversation with ``message``, or answer again if it was sent before."""
        replayed = self._replayed(caller, message)
        if replayed is not None:
            conversation, number = replayed
            return conversation.page(number - 1)
        parent = None if parent_id is None else self._owned(caller, parent_id)
        if parent is not None:
            if parent.parent_id is not None:
                raise Refused(404, "conversation_not_found")  # no Direct Conversation of a Direct one
            parent.check_open()
        conversation = Conversation(f"cnv_{secrets.token_urlsafe(16)}", _owner(caller), parent_id=parent_id)
        self._conversations[conversation.conversation_id] = conversation
        if len(self._conversations) > MAX_CONVERSATIONS:
            self._forget(self._conversations.popitem(last=False)[1])
        if parent is not None:
            parent.direct_id = conversation.conversation_id
            self._add(parent, type="direct_opened", conversation_id=conversation.conversation_id)
        return conversation.page(self._receive(conversation, caller, message, proposal) - 1)

    def send(self, caller: Caller, conversation_id: str, message: Message, cursor: str | None,
             proposal: Proposal | None = None) -> Page:
        """Add ``message``; answer the events from it on, or after ``cursor`` if given."""
        conversation = self._owned(caller, conversation_id)
        after = conversation.after(cursor) if cursor is not None else None
        replayed = self._replayed(caller, message)
        if replayed is not None:
            if replayed[0] is not conversation:
                raise Refused(409, "message_id_conflict")  # the ID went to another conversation
            number = replayed[1]
        else:
            conversation.check_open()
            number = self._receive(conversation, caller, message, proposal)
        return conversation.page(number - 1 if after is None else after)

    def read(self, caller: Caller, conversation_id: str, cursor: str | None) -> Page:
        """The events after ``cursor``, from the start without one."""
        conversation = self._owned(caller, conversation_id)
        return conversation.page(conversation.after(cursor))

    def handoff(self, caller: Caller, conversation_id: str) -> Receipt:
        """Asked for a person (§7.9): Northwind has none here, and its agent says so."""
        conversation = self._owned(caller, conversation_id)
        conversation.check_open()
        self._add(conversation, type="state", status="queued", responder="agent")
        self._say(conversation, "No one from Northwind's team answers on this channel, so I'll keep helping you here.")
        self._add(conversation, type="state", status="idle", responder="agent")
        return Receipt(conversation_id=conversation_id, status="idle")

    def close(self, caller: Caller, conversation_id: str) -> Receipt:
        """Close a conversation (again is fine); its events stay readable."""
        self._close(self._owned(caller, conversation_id))
        return Receipt(conversation_id=conversation_id, status="closed")

    def _owned(self, caller: Caller, conversation_id: str) -> Conversation:
        conversation = self._conversations.get(conversation_id)
        if conversation is None or conversation.owner != _owner(caller):
            raise Refused(404, "conversation_not_found")  # the same for someone else's
        self._conversations.move_to_end(conversation_id)
        return conversation

    def _replayed(self, caller: Caller, message: Message) -> tuple[Conversation, int] | None:
        """Where a message with this ID went before, if it did and is the same message."""
        conversation_id = self._message_ids.get((*_owner(caller), message.id))
        if conversation_id is None:
            return None
        conversation = self._conversations[conversation_id]
        earlier, number = conversation.messages[message.id]
        if earlier != message:
            raise Refused(409, "message_id_conflict")
        return conversation, number

    def _receive(self, conversation: Conversation, caller: Caller, message: Message,
                 proposal: Proposal | None = None) -> int:
        """Add the agent's message and Northwind's reply; the message's event number."""
        number = self._add(conversation, type="message", message=message)
        conversation.messages[message.id] = (message, number)
        self._message_ids[(*conversation.owner, message.id)] = conversation.conversation_id
        if proposal is not None:
            self._say(conversation, proposal.text, proposal.operation)
            return number
        text, sign_in = reply_to(message.text or "", caller)
        self._say(conversation, text)
        if sign_in is not None:
            self._add(conversation, type="authorization", error=sign_in, scope=ORDERS_READ)
        return number

    def _say(self, conversation: Conversation, text: str, operation: dict[str, Any] | None = None) -> None:
        reply = Message(id=f"msg_{secrets.token_urlsafe(16)}", sender="agent", role="company", text=text,
                        operation=operation)
        self._add(conversation, type="message", message=reply)

    def _add(self, conversation: Conversation, **fields: Any) -> int:
        number = conversation.last + 1
        conversation.events.append(Event(id=f"evt_{number}", created_at=self._clock(), **fields))
        while len(conversation.events) > MAX_EVENTS:
            dropped = conversation.events.pop(0)
            conversation.forgotten += 1
            if dropped.message is not None and dropped.message.role == "user":
                del conversation.messages[dropped.message.id]
                del self._message_ids[(*conversation.owner, dropped.message.id)]
        return number

    def _close(self, conversation: Conversation) -> None:
        """Close it, its Direct Conversation first, and tell a parent it is free again."""
        if conversation.closed:
            return
        direct = self._conversations.get(conversation.direct_id or "")
        if direct is not None:
            self._close(direct)
        conversation.closed, conversation.direct_id = True, None
        self._add(conversation, type="state", status="closed", responder="agent")
        parent = self._conversations.get(conversation.parent_id or "")
        if parent is not None and parent.direct_id == conversation.conversation_id:
            parent.direct_id = None
            self._add(parent, type="direct_closed", conversation_id=conversation.conversation_id)

    def _forget(self, conversation: Conversation) -> None:
        self._close(conversation)  # frees its parent
        for message_id in conversation.messages:
            del self._message_ids[(*conversation.owner, message_id)]


def _owner(caller: Caller) -> Owner:
    return caller.client_id, caller.user_id


def _incoming(posted: Posted) -> Message:
    """The agent's message as Northwind keeps it: ``role`` is ``user``, whatever was sent."""
    message = msgspec.structs.replace(posted.message, role="user", operation=None)  # operations are Northwind's
    if message.text is None and message.data is None and message.context is None:
        raise Refused(400, "invalid_request")  # a message needs text, data or context (§7.4)
    return message


# --- the routes -------------------------------------------------------------------------


def _refused(_: Request[Any, Any, Any], exc: Refused) -> Response[dict[str, str]]:
    return Response({"error": exc.code, **exc.details}, status_code=exc.status, media_type=MediaType.JSON)


def _invalid(_: Request[Any, Any, Any], __: ValidationException) -> Response[dict[str, str]]:
    return Response({"error": "invalid_request"}, status_code=400, media_type=MediaType.JSON)


def conversation_router(clock: Callable[[], datetime], ordering: Ordering | None = None) -> Router:
    """``/poppy/conversations``: protect this path with a Session Token, no scope.

    Args:
        clock: The time source of events.
        ordering: Proposes reorders asked for in a message; ``None``: operations are off.
    """
    store = ConversationStore(clock)

    async def proposal_for(caller: Caller, message: Message) -> Proposal | None:
        # Proposed before the store is touched (no await inside it); a replayed message proposes nothing.
        if ordering is None or not caller.has_scopes(ORDERS_READ) or not asks_to_reorder(message.text or ""):
            return None
        if store.is_replay(caller, message):
            return None
        return await propose_reorder(ordering, caller)

    @post("/", status_code=201, request_max_body_size=MAX_BODY)
    async def start(request: Request[Any, Any, Any], data: Posted) -> Page:
        caller, message = verified_caller(request.scope), _incoming(data)
        proposal = await proposal_for(caller, message)
        return store.start(caller, message, data.parent_conversation_id, proposal)

    @post("/{conversation_id:str}/messages", status_code=202, request_max_body_size=MAX_BODY)
    async def send(
        request: Request[Any, Any, Any], conversation_id: str, data: Posted, cursor: str | None = None
    ) -> Page:
        caller, message = verified_caller(request.scope), _incoming(data)
        proposal = await proposal_for(caller, message)
        return store.send(caller, conversation_id, message, cursor, proposal)

    @get("/{conversation_id:str}/events")
    async def events(request: Request[Any, Any, Any], conversation_id: str, cursor: str | None = None) -> Page:
        # Every event exists by the time its POST is answered, so `wait` is never needed.
        return store.read(verified_caller(request.scope), conversation_id, cursor)

    @post("/{conversation_id:str}/handoff", status_code=202)
    async def handoff(request: Request[Any, Any, Any], conversation_id: str) -> Receipt:
        return store.handoff(verified_caller(request.scope), conversation_id)

    @post("/{conversation_id:str}/close", status_code=200)
    async def close(request: Request[Any, Any, Any], conversation_id: str) -> Receipt:
        return store.close(verified_caller(request.scope), conversation_id)

    return Router(
        "/poppy/conversations",
        route_handlers=[start, send, events, handoff, close],
        include_in_schema=False,  # not part of the OpenAPI API: poppy.json lists it apart
        exception_handlers={Refused: _refused, ValidationException: _invalid},
    )
