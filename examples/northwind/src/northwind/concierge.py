"""Northwind's concierge: its support agent behind Frontdoor's hosted conversations (PAP §7).

Frontdoor hosts the conversation endpoint personal agents talk to (``poppy.json`` lists
``{ledger}/{slug}/conversations`` once the tenant turns ``conversations.enabled`` on) and
keeps the transcript, the cursors, the Session checks and the limits. Each user message
reaches Northwind as a ``conversation.message.created`` webhook at ``/webhooks/frontdoor``
(:mod:`northwind.perform` verifies it); the concierge answers while handling it, through
the sdk's :class:`FrontdoorConversations`, so the reply is already there when the agent's
request is answered:

- it streams its reply in two display-only pieces (``text-delta``), then posts the
  complete message under an ID derived from the event, so a retried delivery adds nothing;
- a message about orders from a Session not signed in with ``orders:read`` gets an
  ``authorization`` event naming the scope (§7.11), and a message saying so;
- with operations on, a signed-in message asking to **reorder** proposes reordering the
  latest order through the same :class:`northwind.ordering.Ordering` as the API and the
  MCP tool (the same ``action_key``, so the same operation), and the reply carries it;
- once a person at Northwind took the conversation over in Frontdoor's inbox
  (``responder: human``), the concierge stays quiet.

The user's text is data: the rules below only look for a word in it, never quote it or
follow it. No account data is put in a conversation. A message never confirms anything:
the agent confirms at the operations endpoint.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final, Literal

from frontdoor_sdk import Caller, ConversationMessage, FrontdoorConversations, LedgerError, LedgerRefused

from northwind import catalog
from northwind.ordering import InvalidOrder, Ordering
from northwind.protection import ORDERS_READ

__all__ = ["Concierge", "Proposal", "asks_to_reorder", "reply_to"]

AuthorizationError = Literal["sign_in_required", "insufficient_scope"]
_PRODUCTS: Final = ", ".join(product.name for product in catalog.PRODUCTS)
_LOG: Final = logging.getLogger("northwind.concierge")
_TOO_LATE: Final = frozenset({"conversation_closed", "direct_conversation_open"})
"""Refusals a redelivery would meet again: the conversation moved on, nothing to retry."""


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


class Concierge:
    """Answers each user message of Northwind's hosted conversations.

    Args:
        conversations: The sdk's client of the ledger's conversations API.
        ordering: Proposes reorders asked for in a message; ``None``: operations are off.
    """

    def __init__(self, conversations: FrontdoorConversations, ordering: Ordering | None = None) -> None:
        self._conversations = conversations
        self._ordering = ordering

    async def answer(self, message: ConversationMessage) -> None:
        """Reply to ``message`` (again, idempotently, for a retried delivery).

        A conversation closed in the meantime is not answered.

        Raises:
            LedgerError: Frontdoor refused otherwise or could not be reached: answer the
                webhook with an error, and Frontdoor delivers it again.
        """
        if message.responder == "human":
            return  # a person at Northwind answers this one, in Frontdoor's inbox
        try:
            await self._answer(message)
        except LedgerRefused as refused:
            if refused.code not in _TOO_LATE:
                raise
            _LOG.info("conversation %s moved on before the reply: %s", message.conversation_id, refused.code)

    async def _answer(self, message: ConversationMessage) -> None:
        conversation, text, caller = message.conversation_id, message.text or "", message.caller
        reply_id = f"re_{message.event_id}"  # one reply per user message, whatever the retries
        operation_id = None
        if self._ordering is not None and caller.has_scopes(ORDERS_READ) and asks_to_reorder(text):
            proposal = await propose_reorder(self._ordering, caller)
            reply = proposal.text
            if proposal.operation is not None:
                operation_id = str(proposal.operation["operation_id"])
        else:
            reply, sign_in = reply_to(text, caller)
            if sign_in is not None:
                await self._conversations.ask_sign_in(conversation, ORDERS_READ, error=sign_in)
        half = len(reply) // 2
        for piece in (reply[:half], reply[half:]):  # display-only pieces first (§7.6)
            await self._conversations.delta(conversation, reply_id, piece)
        await self._conversations.reply(conversation, reply, message_id=reply_id, operation_id=operation_id)
        _LOG.info("answered a message of conversation %s", conversation)
