"""The ledger's outbox: webhook messages written in the transition's own transaction.

Thin glue over :mod:`frontdoor_webhooks`: ``emit`` fans an ``operation.*`` event out to the
tenant's subscribed endpoints; ``perform`` addresses the perform call to the kind's endpoint.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
from frontdoor_webhooks.messages import enqueue_event, enqueue_message

__all__ = ["emit", "perform"]

PERFORM_EVENT = "operation.perform"


async def emit(conn: asyncpg.Connection, tenant_id: str, event_type: str, data: dict[str, Any], *,
               now: datetime, subscribers: list[str] | None = None) -> list[str]:
    """Queue ``event_type`` for every endpoint of the tenant subscribed to it.

    ``subscribers``: those endpoints, when the transition's own statement read them (`enqueue_event`).
    """
    return await enqueue_event(conn, tenant_id, event_type, data, now, subscribers=subscribers)


async def perform(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, data: dict[str, Any], *,
                  operation_id: str, now: datetime, message_id: str | None = None,
                  endpoint_held: bool = False) -> str:
    """Queue the perform call; its message ID is the ``webhook-id`` of every attempt.

    ``message_id``: the ID the confirm already wrote on the operation (one statement fewer);
    ``endpoint_held``: the confirm's compare-and-set already took the endpoint's parking lock.
    """
    return await enqueue_message(conn, tenant_id, endpoint_id, PERFORM_EVENT, data, purpose="perform",
                                 operation_id=operation_id, now=now, message_id=message_id,
                                 endpoint_held=endpoint_held)
