"""The relay mode: Frontdoor calls the company's own conversation endpoint and records its answer.

The company names one of its webhook endpoints (``conversations.relay_endpoint_id``): the
URL passed the webhook rules when it was registered (public address or
``FRONTDOOR_WEBHOOK_ALLOWLIST``) and is checked again when the setting is saved, and its
secret signs every relay request as it signs deliveries (Standard Webhooks). This module is
the contract, without I/O: the answer's shape and its reading, the one-attempt policy and
the setting's check. `store` writes the relay's webhook message with the agent's message;
`relay_delivery` sends it and records the answer.

The request: ``POST`` with ``{"type": "conversation.relay", "timestamp", "data": {...}}``, ``data`` being
exactly the ``conversation.message.created`` payload (the agent's message as data, never
executed), under the relay message's ``webhook-id`` (the same on every attempt). The answer:
``200`` with ``{"messages": [{"id"?, "text"?, "data"?}], "events"?: [...], "done"?, "handoff"?}``
(or ``202``/``204``: nothing now, the company answers later through the ledger API).
``events`` are ``{"type": "authorization", "scope", "error"?}`` (§7.11) and ``{"type":
"user_requested", "reason"}`` (the company needs the user themselves), both recorded before the
messages by the company API's rules, and ``{"type": "text-delta", "message_id", "text"}`` (§7.6, shown to streaming
agents, never stored). Anything else is a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal

import asyncpg
import msgspec
from frontdoor_core.errors import DomainError, Invalid
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.event_types import RELAY
from frontdoor_webhooks.retry_policy import RetryPolicy

from .rules import IDENTIFIER, MAX_MESSAGE_BYTES, authorization_event, check_delta, user_requested_event

__all__ = [
    "MAX_RELAY_EVENTS",
    "MAX_RELAY_MESSAGES",
    "RELAY_EVENT_TYPE",
    "RelayAnswer",
    "RelayAuthorization",
    "RelayDelta",
    "RelayFailed",
    "RelayMessage",
    "RelayTarget",
    "RelayUserRequested",
    "check_relay_endpoint",
    "read_answer",
    "relay_policy",
]

RELAY_EVENT_TYPE = RELAY
MAX_RELAY_MESSAGES = 10
MAX_RELAY_EVENTS = 20
_FIELD = "conversations.relay_endpoint_id"


class RelayTarget(msgspec.Struct, frozen=True, kw_only=True):
    """Where a tenant's agent messages are relayed, and the lease the writing process takes on each.

    Attributes:
        endpoint_id: The tenant's relay endpoint (``conversations.relay_endpoint_id``).
        lease: The delivery lease (`DeliveryPolicy.lease`): the relay is the writer's until
            it ends, then any deliverer's.
    """

    endpoint_id: str
    lease: timedelta


class RelayMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One reply in the company's answer (``role: company``, ``sender: agent``)."""

    id: str | None = None
    text: str | None = None
    data: dict[str, Any] | None = None


class RelayAuthorization(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                         tag="authorization", tag_field="type"):
    """Ask the agent to sign the user in for ``scope`` (§7.11, PAP-7.11-01)."""

    scope: str
    error: Literal["sign_in_required", "insufficient_scope"] = "sign_in_required"


class RelayUserRequested(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                         tag="user_requested", tag_field="type"):
    """The company needs the user themselves (``reason``), as the company API's ``user-requested``."""

    reason: str


class RelayDelta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                 tag="text-delta", tag_field="type"):
    """A piece of a reply being written: display only (§7.6, PAP-7.6-01), never stored."""

    message_id: str
    text: str


class RelayAnswer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The company's answer to one relayed message.

    Attributes:
        messages: Replies, recorded in order (at most `MAX_RELAY_MESSAGES`).
        events: ``authorization`` events (recorded before the replies) and ``text-delta``
            pieces (shown to streaming agents), at most `MAX_RELAY_EVENTS`.
        done: The last reply ends the turn (``idle``); false: more comes through the API.
        handoff: A person should answer: the conversation is queued for the inbox.
    """

    messages: list[RelayMessage] = msgspec.field(default_factory=list)
    events: list[RelayAuthorization | RelayUserRequested | RelayDelta] = msgspec.field(default_factory=list)
    done: bool = True
    handoff: bool = False

    @property
    def authorizations(self) -> list[dict[str, Any]]:
        """The ``authorization`` event drafts, in order (checked by `read_answer`)."""
        return [d for d in self.company_events if d["type"] == "authorization"]

    @property
    def company_events(self) -> list[dict[str, Any]]:
        """The ``authorization`` and ``user_requested`` event drafts, in order (checked by `read_answer`).

        Recorded before the replies, by the rules the company API applies (`rules`).
        """
        drafts = [_draft(e) for e in self.events if not isinstance(e, RelayDelta)]
        return [d for d in drafts if isinstance(d, dict)]

    @property
    def deltas(self) -> list[RelayDelta]:
        """The ``text-delta`` pieces, in order."""
        return [e for e in self.events if isinstance(e, RelayDelta)]


def _draft(event: RelayAuthorization | RelayUserRequested) -> dict[str, Any] | str:
    """The event's draft, or why the rules refuse it (`rules.authorization_event`, `rules.user_requested_event`)."""
    if isinstance(event, RelayUserRequested):
        return user_requested_event(event.reason)
    return authorization_event(event.scope, event.error)


class RelayFailed(Exception):
    """The company's endpoint gave no usable answer (the reason is for logs: never the body)."""


def relay_policy(policy: DeliveryPolicy) -> DeliveryPolicy:
    """The delivery policy of a relay message: one attempt, the rest as every delivery.

    An agent waits on the relay's answer, so a failed attempt is not retried on the
    webhook schedule: it queues the conversation for a person. An attempt that never
    settled (its process died) is not counted: the relay is claimed again after its lease.
    """
    retry = policy.retry
    return msgspec.structs.replace(policy, retry=RetryPolicy(schedule=(timedelta(0),), jitter=retry.jitter,
                                                             retry_after_max=retry.retry_after_max))


def _has_nul(value: object) -> bool:
    """Whether a NUL character is anywhere in ``value`` (PostgreSQL's jsonb cannot store one)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _check_message(m: RelayMessage, index: int) -> None:
    # An answer that cannot be stored must fail its attempt: it would otherwise roll the
    # attempt's settle back every time, and the relay would be sent again after every lease.
    if _has_nul(m.text) or _has_nul(m.data):
        raise RelayFailed(f"messages[{index}] contains a NUL character")
    if m.id is not None and not IDENTIFIER.fullmatch(m.id):
        raise RelayFailed(f"messages[{index}].id is not 1 to 256 URL-safe base64 characters")
    if m.text is None and m.data is None:
        raise RelayFailed(f"messages[{index}] has neither text nor data")
    if len(msgspec.json.encode(m)) > MAX_MESSAGE_BYTES:
        raise RelayFailed(f"messages[{index}] is larger than {MAX_MESSAGE_BYTES} bytes")


def _check_event(e: RelayAuthorization | RelayUserRequested | RelayDelta, index: int) -> None:
    if isinstance(e, RelayDelta):
        problem = check_delta(e.message_id, e.text)
    else:
        draft = _draft(e)
        problem = draft if isinstance(draft, str) else ("contains a NUL character" if _has_nul(draft) else None)
    if problem is not None:
        raise RelayFailed(f"events[{index}]: {problem}")


def read_answer(status: int, body: bytes, *, truncated: bool = False) -> RelayAnswer:
    """The company's answer, checked as the ledger API checks a reply, a delta or an authorization.

    Raises:
        RelayFailed: Not 2xx, not the documented JSON, too many or too large messages, an
            event the §7 rules refuse.
    """
    if status in (202, 204):
        return RelayAnswer(done=False)
    if status != 200:
        raise RelayFailed(f"the endpoint answered {status}")
    if truncated:
        raise RelayFailed("the answer is too large")
    try:
        answer = msgspec.json.decode(body, type=RelayAnswer)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise RelayFailed(f"the answer is not a relay answer: {str(exc)[:120]}") from None
    if len(answer.messages) > MAX_RELAY_MESSAGES:
        raise RelayFailed(f"more than {MAX_RELAY_MESSAGES} messages")
    if len(answer.events) > MAX_RELAY_EVENTS:
        raise RelayFailed(f"more than {MAX_RELAY_EVENTS} events")
    for index, message in enumerate(answer.messages):
        _check_message(message, index)
    for index, event in enumerate(answer.events):
        _check_event(event, index)
    return answer


async def check_relay_endpoint(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str | None, *,
                               allow_insecure: bool, allowlist: Sequence[str]) -> None:
    """Refuse a relay setting naming no endpoint of the tenant, or one whose URL the webhook rules refuse now.

    Raises:
        Invalid: ``invalid_settings`` with the reason under ``conversations.relay_endpoint_id``
            (``url_not_public``'s reason for a private address not in the allowlist).
    """
    if endpoint_id is None:
        return
    from frontdoor_webhooks.endpoint_url import validate_endpoint_url
    from frontdoor_webhooks.endpoints import get_endpoint

    try:
        endpoint = await get_endpoint(conn, tenant_id, endpoint_id)
    except DomainError:
        raise Invalid("invalid_settings", "The issuer settings are not valid.",
                      fields={_FIELD: "no webhook endpoint of this organisation has this ID"}) from None
    try:
        validate_endpoint_url(endpoint.url, allow_insecure=allow_insecure, allowlist=allowlist)
    except Invalid as exc:
        reason = (exc.fields or {}).get("url", exc.code)
        raise Invalid("invalid_settings", "The issuer settings are not valid.",
                      fields={_FIELD: f"the endpoint's URL is refused: {reason}"}) from None
