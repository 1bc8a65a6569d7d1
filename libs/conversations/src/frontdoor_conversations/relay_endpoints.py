"""A relay endpoint disabled or deleted while relays wait for it: their conversations go to a person.

A relay waits for a deliverer when its ledger died before the attempt settled, or when the
endpoint's rate limit left the ledger no turn: it is then sent after the writer's lease. If
the endpoint is disabled meanwhile, the relay would wait, parked, until it is enabled again;
if it is deleted, the relay goes with it. Either way the agent would read ``working`` with
nobody answering. So disabling or deleting an endpoint queues for a person (as a failed
relay does, `store.queue_for_person`) every open conversation whose relay to that endpoint
is pending and unanswered, in the same transaction, scoped by the tenant.

Locks follow the writers' order (a conversation's row, then the endpoint, `store._receive`):
the conversations found are queued before the endpoint is disabled or deleted, then those
whose relay was committed meanwhile, once the endpoint's lock is held.

A relay left parked on a disabled endpoint is sent once it is enabled again; its answer is
recorded unless a person took the conversation over (`relay_delivery._record`).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
from frontdoor_tenancy.actor import Actor
from frontdoor_webhooks import endpoints as wh_endpoints
from frontdoor_webhooks.endpoints import Endpoint
from frontdoor_webhooks.parking import in_transaction

from . import store

__all__ = ["delete_endpoint", "disable_endpoint", "queue_stranded_relays"]


async def _stranded(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str) -> list[str]:
    """The open conversations with a pending relay to the endpoint not answered yet, by ID."""
    rows = await conn.fetch(
        "SELECT DISTINCT c.id FROM webhook_messages m"
        " JOIN conversations c ON c.tenant_id = m.tenant_id AND c.id = (m.body::jsonb)->'data'->>'conversation_id'"
        " WHERE m.tenant_id = $1 AND m.endpoint_id = $2 AND m.purpose = 'relay' AND m.state = 'pending'"
        " AND c.status <> 'closed'"
        " AND NOT EXISTS (SELECT 1 FROM conversation_message_ids a WHERE a.tenant_id = m.tenant_id"
        "  AND a.scope = 'relay ' || c.id AND a.message_id = (m.body::jsonb)->'data'->>'event_id')"
        " ORDER BY c.id", tenant_id, endpoint_id)
    return [str(r["id"]) for r in rows]


async def queue_stranded_relays(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, *,
                                now: datetime) -> list[str]:
    """Queue for a person the conversations whose pending relay to ``endpoint_id`` cannot be sent.

    Returns the conversations that changed (to wake their readers after the commit).
    """
    changed = []
    for cid in await _stranded(conn, tenant_id, endpoint_id):
        before = await store.find(conn, tenant_id, cid)
        after = await store.queue_for_person(conn, tenant_id, cid, now=now)
        if before is not None and after is not None and after.last_seq != before.last_seq:
            changed.append(cid)
    return changed


async def disable_endpoint(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, reason: str,
                           now: datetime) -> tuple[Endpoint, list[str]]:
    """`frontdoor_webhooks.endpoints.disable_endpoint`, and the conversations its pending relays leave queued.

    Returns the endpoint and the conversations that changed.

    Raises:
        NotFound: No such endpoint for this tenant (nothing is changed).
    """
    async with in_transaction(conn):
        changed = await queue_stranded_relays(conn, actor.tenant_id, endpoint_id, now=now)
        endpoint = await wh_endpoints.disable_endpoint(conn, actor, endpoint_id, reason=reason, now=now)
        changed += await queue_stranded_relays(conn, actor.tenant_id, endpoint_id, now=now)
    return endpoint, changed


async def delete_endpoint(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, now: datetime) -> list[str]:
    """`frontdoor_webhooks.endpoints.delete_endpoint`, the conversations of its pending relays queued first.

    Returns the conversations that changed.

    Raises:
        Conflict: ``webhook_endpoint_in_use`` (nothing is changed).
        NotFound: No such endpoint for this tenant (nothing is changed).
    """
    async with in_transaction(conn):
        changed = await queue_stranded_relays(conn, actor.tenant_id, endpoint_id, now=now)
        await wh_endpoints.delete_endpoint(conn, actor, endpoint_id, now=now)
    return changed
