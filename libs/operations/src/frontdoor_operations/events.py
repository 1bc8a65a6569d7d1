"""The ledger's outbox: webhook messages written in the transition's own transaction.

Thin glue over :mod:`frontdoor_webhooks`: ``emit`` fans an ``operation.*`` event out to the
tenant's subscribed endpoints; ``perform`` addresses the perform call to the kind's endpoint.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg
from frontdoor_webhooks.delivery import PreClaimed, enqueue_claimed
from frontdoor_webhooks.messages import enqueue_event, enqueue_message

__all__ = ["emit", "perform", "perform_claimed"]

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


async def perform_claimed(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, data: dict[str, Any], *,
                          operation_id: str, now: datetime, message_id: str, lease: timedelta) -> PreClaimed | None:
    """`perform`, the message claimed for its first attempt by this process (`enqueue_claimed`).

    The confirm's compare-and-set must already hold the endpoint's parking lock. None: the
    endpoint is disabled, the message is parked (unclaimed) as `perform` writes it.
    """
    return await enqueue_claimed(conn, tenant_id, endpoint_id, PERFORM_EVENT, data, purpose="perform",
                                 operation_id=operation_id, now=now, lease=lease, message_id=message_id)
