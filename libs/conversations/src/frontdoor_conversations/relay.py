"""The relay mode: Frontdoor calls the company's own conversation endpoint and records its answer.

The company names one of its webhook endpoints (``conversations.relay_endpoint_id``): the
URL passed the webhook rules when it was registered (public address or
``FRONTDOOR_WEBHOOK_ALLOWLIST``) and is checked again when the setting is saved, and its
secret signs every relay request as it signs deliveries (Standard Webhooks). This module is
the contract, without I/O: the request's body and ``webhook-id``, and the reading of the
company's answer. The ledger's `ConversationsHub` posts and records.

The request: ``POST`` with ``{"type": "conversation.relay", "timestamp", "data": {...}}``, ``data`` being
exactly the ``conversation.message.created`` payload (the agent's message as data, never
executed). The answer: ``200`` with ``{"messages": [{"id"?, "text"?, "data"?}], "done"?,
"handoff"?}`` (or ``202``/``204``: nothing now, the company answers later through the
ledger API). Anything else is a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import msgspec
from frontdoor_core.errors import DomainError, Invalid

from .rules import IDENTIFIER, MAX_MESSAGE_BYTES

__all__ = [
    "MAX_RELAY_MESSAGES",
    "RELAY_EVENT_TYPE",
    "RelayAnswer",
    "RelayFailed",
    "RelayMessage",
    "check_relay_endpoint",
    "read_answer",
    "relay_body",
    "relay_message_id",
]

RELAY_EVENT_TYPE = "conversation.relay"
MAX_RELAY_MESSAGES = 10
_FIELD = "conversations.relay_endpoint_id"


class RelayMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One reply in the company's answer (``role: company``, ``sender: agent``)."""

    id: str | None = None
    text: str | None = None
    data: dict[str, Any] | None = None


class RelayAnswer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The company's answer to one relayed message.

    Attributes:
        messages: Replies, recorded in order (at most `MAX_RELAY_MESSAGES`).
        done: The last reply ends the turn (``idle``); false: more comes through the API.
        handoff: A person should answer: the conversation is queued for the inbox.
    """

    messages: list[RelayMessage] = msgspec.field(default_factory=list)
    done: bool = True
    handoff: bool = False


class RelayFailed(Exception):
    """The company's endpoint gave no usable answer (the reason is for logs: never the body)."""


def relay_body(data: dict[str, Any], now: datetime) -> bytes:
    """The request's body for one agent message (``data``: its webhook payload), a Standard
    Webhooks event like every delivery (``type``, ``timestamp``, ``data``)."""
    stamp = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return msgspec.json.encode({"type": RELAY_EVENT_TYPE, "timestamp": stamp, "data": data})


def relay_message_id(event_id: str) -> str:
    """The ``webhook-id`` of the relay of the message recorded as ``event_id``: the same on every attempt."""
    return f"rly_{event_id}"


def _check_message(m: RelayMessage, index: int) -> None:
    if m.id is not None and not IDENTIFIER.fullmatch(m.id):
        raise RelayFailed(f"messages[{index}].id is not 1 to 256 URL-safe base64 characters")
    if m.text is None and m.data is None:
        raise RelayFailed(f"messages[{index}] has neither text nor data")
    if len(msgspec.json.encode(m)) > MAX_MESSAGE_BYTES:
        raise RelayFailed(f"messages[{index}] is larger than {MAX_MESSAGE_BYTES} bytes")


def read_answer(status: int, body: bytes, *, truncated: bool = False) -> RelayAnswer:
    """The company's answer, checked as the ledger API checks a reply.

    Raises:
        RelayFailed: Not 2xx, not the documented JSON, too many or too large messages.
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
    for index, message in enumerate(answer.messages):
        _check_message(message, index)
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
