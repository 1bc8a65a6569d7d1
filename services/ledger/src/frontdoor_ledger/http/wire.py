"""The shapes the ledger answers, as msgspec structs, for its OpenAPI document.

The handlers build these answers as JSON objects (``frontdoor_operations.ledger.to_wire``,
``company_api._company_view``, ``company_conversations._view``); the structs describe them,
and the fuzzing test (``tests/integration/ledger/test_ledger_fuzz.py``) checks every answer
against the document, so a member added or renamed on one side fails there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

__all__ = [
    "AgentConversationBody",
    "CompanyDetails",
    "Confirmation",
    "ConfirmBody",
    "ConversationAnswer",
    "ConversationList",
    "ConversationPage",
    "ConversationReply",
    "ConversationView",
    "DeltaAccepted",
    "EventsForgotten",
    "OperationEnvelope",
    "OperationObject",
    "OperationPage",
    "OperationRecord",
]

State = Literal["proposed", "in_progress", "succeeded", "failed", "cancelled", "expired"]


class Confirmation(msgspec.Struct, frozen=True, kw_only=True):
    """Who confirmed which revision, and when (Operations §3)."""

    revision: int
    approved_by: Literal["user", "standing_permission"]
    confirmed_at: datetime


class OperationObject(msgspec.Struct, frozen=True, kw_only=True):
    """The operation object of the PAP Operations extension v1 (§3), as agents and companies see it."""

    operation_id: str
    revision: int
    state: State
    summary: str
    terms: dict[str, Any] | None = None
    expires_at: datetime
    user_approval_required: bool
    url: str | None = None
    confirmation: Confirmation | None
    result: dict[str, Any] | None


class OperationEnvelope(msgspec.Struct, frozen=True, kw_only=True):
    operation: OperationObject


class CompanyDetails(msgspec.Struct, frozen=True, kw_only=True):
    """What only the company sees of an operation."""

    kind: str
    client_id: str
    user_id: str
    account: str | None
    session_id: str | None
    action_key: str | None
    input: dict[str, Any] | None
    confirmed_via: str | None
    needs_attention: bool
    attention_reason: str | None
    sequence: int
    created_at: datetime
    updated_at: datetime


class OperationRecord(msgspec.Struct, frozen=True, kw_only=True):
    operation: OperationObject
    details: CompanyDetails


class OperationPage(msgspec.Struct, frozen=True, kw_only=True):
    """Newest first; ``next_cursor`` asks for the next page, ``null`` on the last."""

    items: list[OperationRecord]
    next_cursor: str | None


class ConversationView(msgspec.Struct, frozen=True, kw_only=True):
    """A hosted conversation, as the company sees it."""

    conversation_id: str
    status: Literal["working", "idle", "queued", "closed"]
    responder: Literal["agent", "human"]
    client_id: str
    user_id: str
    account: str | None
    session_id: str | None
    parent_conversation_id: str | None
    direct_conversation_id: str | None
    created_at: datetime
    updated_at: datetime


class ConversationList(msgspec.Struct, frozen=True, kw_only=True):
    conversations: list[ConversationView]


class ConversationPage(msgspec.Struct, frozen=True, kw_only=True):
    """The conversation and a page of its events (PAP §7.5); ``cursor`` reads on."""

    conversation: ConversationView
    events: list[dict[str, Any]]
    cursor: str | None
    has_more: bool


class ConversationReply(msgspec.Struct, frozen=True, kw_only=True):
    conversation: ConversationView
    message: dict[str, Any]


class ConversationAnswer(msgspec.Struct, frozen=True, kw_only=True):
    conversation: ConversationView


class DeltaAccepted(msgspec.Struct, frozen=True, kw_only=True):
    accepted: bool


class EventsForgotten(msgspec.Struct, frozen=True, kw_only=True):
    forgotten: int


class ConfirmBody(msgspec.Struct, frozen=True, kw_only=True):
    """The agent's confirm (Operations §5.2): the revision the user approved, and how."""

    revision: int
    approved_by: Literal["user", "standing_permission"]


class AgentConversationBody(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's message (PAP §7.3): ``message`` with ``id`` and ``text`` and/or ``data``."""

    message: dict[str, Any]
    parent_conversation_id: str | None = None
