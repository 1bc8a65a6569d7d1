"""The catalogue of webhook event types a company can subscribe to.

Closed: an endpoint subscribes to a list of these, and `enqueue_event` refuses any
other. ``operation.perform`` is apart: not an event but the ledger asking one chosen
endpoint to carry out a confirmed operation, so it cannot be subscribed to. Nor can
``webhook.test``, sent to one endpoint when its owner asks. Payloads: `event_payloads`.
"""

from __future__ import annotations

from collections.abc import Iterable

from frontdoor_core.errors import Invalid

__all__ = ["EVENT_TYPES", "PERFORM", "RELAY", "TEST_EVENT", "validate_event_types"]

EVENT_TYPES: tuple[str, ...] = (
    "operation.proposed",
    "operation.revised",
    "operation.confirmed",
    "operation.succeeded",
    "operation.failed",
    "operation.cancelled",
    "operation.expired",
    "session.signed_in",
    "session.signed_out",
    "account.revoked",
    "agent.blocked",
    "domain.verified",
    "domain.suspended",
    "delivery.exhausted",
    "endpoint.disabled",
    "conversation.message.created",
    "conversation.handoff_requested",
    "billing.payment_failed",
)
"""Every subscribable event type, in the order the dashboard lists them."""

PERFORM = "operation.perform"
"""The perform webhook's type: addressed to one endpoint, never subscribed to."""

RELAY = "conversation.relay"
"""A relayed conversation message: addressed to the tenant's relay endpoint, never subscribed to."""

TEST_EVENT = "webhook.test"
"""A test event: sent to one endpoint on request, never subscribed to."""

_KNOWN = frozenset(EVENT_TYPES)


def validate_event_types(event_types: Iterable[str]) -> list[str]:
    """Check a subscription list and return it without duplicates, in catalogue order.

    An empty list is valid: the endpoint then receives only what is addressed to it
    (the perform webhook).

    Raises:
        Invalid: ``invalid_event_types`` naming the unknown types.
    """
    wanted = list(event_types)
    unknown = sorted({t for t in wanted if t not in _KNOWN})
    if unknown:
        raise Invalid("invalid_event_types", "Some event types are not in the catalogue.",
                      fields={"event_types": "unknown: " + ", ".join(unknown[:10])})
    chosen = set(wanted)
    return [t for t in EVENT_TYPES if t in chosen]
