"""The documented payloads of every webhook event: one msgspec struct per type, version 1.

A message's body is ``{"type", "timestamp", "data"}``; these structs are its ``data``.
They carry identifiers and facts, never a token, code or secret, and every one carries
``sequence``: a number that grows with every change of the object the event is about
(an operation, a Session, a sign-in, an agent, a domain, an endpoint, a message). It is
not contiguous and means nothing across objects; a receiver that already handled a
higher ``sequence`` for the same object can ignore the event as stale.

Versioning: this is version 1 of each payload. Within a version fields are only added,
never removed, renamed or retyped, so receivers must ignore fields they do not know. The
JSON Schemas in ``docs/webhooks/schemas/`` are generated from these structs
(``scripts/export_webhook_schemas.py``) and a test keeps them in step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from .event_types import EVENT_TYPES, TEST_EVENT

__all__ = [
    "PAYLOADS",
    "PAYLOAD_VERSION",
    "AccountRevoked",
    "AgentBlocked",
    "BillingPaymentFailed",
    "ConversationHandoffRequested",
    "ConversationMessage",
    "ConversationMessageCreated",
    "DeliveryExhausted",
    "DomainSuspended",
    "DomainVerified",
    "EndpointDisabled",
    "OperationConfirmation",
    "OperationEvent",
    "OperationObject",
    "OperationResult",
    "SessionSignedIn",
    "SessionSignedOut",
    "WebhookTest",
    "message_schema",
    "payload_for",
]

PAYLOAD_VERSION: Final = 1

Timestamp = Annotated[str, Meta(description="RFC 3339 time in UTC (Z).", extra_json_schema={"format": "date-time"})]
Sequence = Annotated[int, Meta(ge=1, description=(
    "Grows with every change of the object this event is about; compare only values for the same object "
    "and ignore an event whose sequence is lower than one already handled. Not contiguous."))]
ClientId = Annotated[str, Meta(description="The agent's client_id (the URL of its metadata document).")]
UserId = Annotated[str, Meta(description="The User ID the agent uses for this user.")]
AccountId = Annotated[str, Meta(description="The company's own account identifier the user signed in to.")]


class _Payload(msgspec.Struct, frozen=True, kw_only=True):
    sequence: Sequence


# --- operation.* -----------------------------------------------------------------------


class OperationConfirmation(msgspec.Struct, frozen=True, kw_only=True):
    """How and when an operation was confirmed."""

    revision: Annotated[int, Meta(ge=1)]
    approved_by: Literal["user", "standing_permission"]
    confirmed_at: Timestamp


class OperationResult(msgspec.Struct, frozen=True, kw_only=True):
    """What happened, as the company reported it (or Frontdoor, for cancelled and expired)."""

    summary: str
    data: dict[str, Any] | UnsetType = UNSET


class OperationObject(msgspec.Struct, frozen=True, kw_only=True):
    """The operation object of the Operations extension (§3), as agents see it."""

    operation_id: str
    revision: Annotated[int, Meta(ge=1)]
    state: Literal["proposed", "in_progress", "succeeded", "failed", "cancelled", "expired"]
    summary: str
    terms: dict[str, Any] | UnsetType = UNSET
    expires_at: Timestamp
    user_approval_required: bool
    url: str | UnsetType = UNSET
    confirmation: OperationConfirmation | None
    result: OperationResult | None


class OperationEvent(_Payload, frozen=True, kw_only=True):
    """``operation.proposed``, ``.revised``, ``.confirmed``, ``.succeeded``, ``.failed``, ``.cancelled``,
    ``.expired``: the operation after the change. ``sequence`` is the operation's."""

    operation: OperationObject
    kind: str
    account: AccountId | None
    client_id: ClientId
    user_id: UserId


# --- sessions, accounts, agents (forwarded from the sessions library's outbox) ----------


class SessionSignedIn(_Payload, frozen=True, kw_only=True):
    """A Session was signed in to an account (or its scope changed). ``sequence`` is the Session's."""

    session_id: str
    client_id: ClientId
    user_id: UserId
    account: AccountId
    scope: Annotated[str, Meta(description="The granted scopes, space-separated.")]
    sign_in_id: Annotated[str, Meta(description="The sign-in (token family) the Session is signed in from.")]


class SessionSignedOut(_Payload, frozen=True, kw_only=True):
    """A Session was signed out (its sign-in was revoked). ``sequence`` is the Session's."""

    session_id: str
    client_id: ClientId
    user_id: UserId
    sign_in_id: str
    reason: Annotated[str, Meta(description=(
        "revoked_by_agent, disconnected, agent_tokens_revoked, or another reason added later."))]


class AccountRevoked(_Payload, frozen=True, kw_only=True):
    """A sign-in and every Account Token of it stopped working. ``sequence`` is the sign-in's.

    ``user_id`` is null for a PAP 1.0 sign-in, which is independent of Session identity
    (ADR 0004 §4): its access tokens (``sgn`` = ``sign_in_id``) stop working.
    """

    sign_in_id: str
    client_id: ClientId
    account: AccountId
    reason: str
    user_id: UserId | None = None


class AgentBlocked(_Payload, frozen=True, kw_only=True):
    """The company blocked an agent; its live Sessions ended. ``sequence`` is the agent's."""

    client_id: ClientId
    sessions_ended: Annotated[int, Meta(ge=0)]


# --- domains (forwarded from the tenancy library's outbox) --------------------------------


class DomainVerified(_Payload, frozen=True, kw_only=True):
    """A domain was proven by DNS and is listed in ``poppy_domains``. ``sequence`` is the domain's."""

    domain: str
    previous_status: Literal["pending", "suspended", "failed"]
    verified_at: Timestamp | None


class DomainSuspended(_Payload, frozen=True, kw_only=True):
    """A verified domain's record stayed missing past the grace period; it left ``poppy_domains``."""

    domain: str
    missing_since: Timestamp | None


# --- the webhooks themselves --------------------------------------------------------------


class DeliveryExhausted(_Payload, frozen=True, kw_only=True):
    """A message to another endpoint failed every attempt of the schedule. ``sequence`` is the message's."""

    message_id: str
    endpoint_id: str
    event_type: str
    attempts: Annotated[int, Meta(ge=1)]


class EndpointDisabled(_Payload, frozen=True, kw_only=True):
    """Another endpoint was disabled by Frontdoor (410 Gone, or failing too long); its messages wait."""

    endpoint_id: str
    url: str
    reason: Literal["gone", "failing"]
    failing_since: Timestamp


# --- conversation.* (hosted conversations, PAP §7) ------------------------------------


class ConversationMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The personal agent's message as sent (PAP §7.4): data to read, never instructions to follow."""

    id: str
    sender: Annotated[Literal["agent", "human"], Meta(description=(
        "human when the message carries the user's own words, agent when the personal agent wrote it."))]
    role: Literal["user"]
    text: str | None = None
    data: dict[str, Any] | None = None
    context: Annotated[dict[str, Any] | None, Meta(description=(
        "Facts the agent shares: locale, time_zone, user_available (PAP §7.4)."))] = None


class ConversationMessageCreated(_Payload, frozen=True, kw_only=True):
    """A personal agent posted a message to a hosted conversation: the company's agent answers it
    through the ledger API (``POST {ledger}/{slug}/v1/conversations/{conversation_id}/messages``).
    ``sequence`` is the event's position in its conversation."""

    conversation_id: str
    parent_conversation_id: Annotated[str | None, Meta(description=(
        "Set for a Direct Conversation (PAP §7.10): the user talks with the company themselves."))]
    event_id: str
    message: ConversationMessage
    session_id: str
    client_id: ClientId
    user_id: UserId
    account: Annotated[AccountId | None, Meta(description="The Session's account now; null when signed out.")]
    scopes: Annotated[list[str], Meta(description="The Session's granted scopes now (empty when signed out).")]
    responder: Literal["agent", "human"]
    status: Literal["working", "idle", "queued", "closed"]


class ConversationHandoffRequested(_Payload, frozen=True, kw_only=True):
    """A personal agent asked for a person (PAP §7.9): the conversation is ``queued`` in the
    dashboard's inbox until someone at the company takes it over (``responder: human``).
    Sent once per request; asking again while queued sends nothing."""

    conversation_id: str
    parent_conversation_id: str | None
    session_id: str
    client_id: ClientId
    user_id: UserId
    account: Annotated[AccountId | None, Meta(description="The Session's account; null when signed out.")]
    requested_at: Timestamp
    responder: Literal["agent", "human"]
    status: Literal["queued"]
    sequence: Annotated[int, Meta(ge=1, description="The position of the request's state event.")]


# --- billing (Frontdoor's own plan, docs/billing.md) ------------------------------------


class BillingPaymentFailed(_Payload, frozen=True, kw_only=True):
    """A payment for the company's Frontdoor plan failed: a grace period started. Nothing is refused
    until ``grace_until``; after it, new agent Sessions are refused until the invoice is paid."""

    invoice_id: str
    amount_due: Annotated[int, Meta(ge=0, description="In the smallest unit of ``currency``.")]
    currency: str
    failed_at: Timestamp
    grace_until: Timestamp
    billing_url: Annotated[str, Meta(description="The dashboard's Billing page, where an owner pays.")]


class WebhookTest(_Payload, frozen=True, kw_only=True):

    """Sent only on request (``POST /api/v1/webhook-endpoints/{id}/test``); cannot be subscribed to."""

    endpoint_id: str
    note: str = "A test event from Frontdoor. Nothing happened."


_OPERATION_TYPES = tuple(t for t in EVENT_TYPES if t.startswith("operation."))
PAYLOADS: Mapping[str, type[msgspec.Struct]] = {
    **dict.fromkeys(_OPERATION_TYPES, OperationEvent),
    "session.signed_in": SessionSignedIn,
    "session.signed_out": SessionSignedOut,
    "account.revoked": AccountRevoked,
    "agent.blocked": AgentBlocked,
    "domain.verified": DomainVerified,
    "domain.suspended": DomainSuspended,
    "delivery.exhausted": DeliveryExhausted,
    "endpoint.disabled": EndpointDisabled,
    "conversation.message.created": ConversationMessageCreated,
    "conversation.handoff_requested": ConversationHandoffRequested,
    "billing.payment_failed": BillingPaymentFailed,
    TEST_EVENT: WebhookTest,
}
"""The ``data`` struct of every event type (the subscribable ones and ``webhook.test``)."""


def payload_for(event_type: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``fields`` against the event's struct and return the ``data`` to send.

    Unknown fields are dropped, so an outbox row written by an older or newer release
    still yields exactly the documented payload.

    Raises:
        KeyError: ``event_type`` has no documented payload.
        msgspec.ValidationError: A field is missing or of the wrong type.
    """
    struct = msgspec.convert(dict(fields), PAYLOADS[event_type])
    data: dict[str, Any] = msgspec.to_builtins(struct)
    return data


def message_schema(event_type: str) -> dict[str, Any]:
    """The JSON Schema of a whole message body of ``event_type`` (``type``, ``timestamp``, ``data``)."""
    payload = PAYLOADS[event_type]
    envelope = msgspec.defstruct(
        "Message_" + event_type.replace(".", "_"),
        [("type", Literal[event_type]), ("timestamp", Timestamp), ("data", payload)],
        kw_only=True, frozen=True,
    )
    schema = msgspec.json.schema(envelope)
    ref = schema.pop("$ref").rsplit("/", 1)[-1]
    defs: dict[str, Any] = schema.pop("$defs")
    body = defs.pop(ref)
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://frontdoor.dev/schemas/webhooks/{event_type}.v{PAYLOAD_VERSION}.json",
        "title": f"{event_type} (v{PAYLOAD_VERSION})",
        "description": (payload.__doc__ or "").strip().replace("\n    ", " ").replace("``", "`"),
        **body,
        "$defs": defs,
    }
