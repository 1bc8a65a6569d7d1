"""Parking: a disabled endpoint's pending messages are kept out of the due index.

A disabled endpoint's messages wait (nothing is dropped) and keep arriving while it stays
disabled. Left among the due messages they would be walked, and filtered out, by every
claim query; so they are *parked* (``webhook_messages.parked``), which the due index
leaves out. Disabling an endpoint parks its pending messages, a message written for (or
re-queued to) a disabled endpoint is written parked, and enabling the endpoint unparks
them all and makes them due at once.

Enabling must not miss a message being written at the same moment, parked because the
writer still saw the endpoint disabled: it would wait for ever. Writers therefore hold a
shared advisory lock on the endpoint (`hold_endpoint`) before reading its state, and
`enable` takes it exclusively before unparking, so each sees the other's committed work.
Disabling takes it too; the delivery engine's automatic disabling does not (it writes
events to other endpoints in the same transaction, which could deadlock): a message
written during that instant may stay unparked, which costs a row in the due index, never
a delivery (the claim still checks ``enabled``).
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import asyncpg

__all__ = ["HOLD_ENDPOINT_SQL", "hold_endpoint", "in_transaction", "lock_endpoint", "park", "unpark"]

_KEY = "SELECT {fn}(hashtextextended('webhook_endpoint:' || $1::text, 0))"
HOLD_ENDPOINT_SQL = "pg_advisory_xact_lock_shared(hashtextextended('webhook_endpoint:' || {endpoint}::text, 0))"
"""`hold_endpoint`'s lock as an expression, ``{endpoint}`` the endpoint ID's SQL: for a statement that takes it
itself before the message is written by a later one (`messages.enqueue_message`'s ``endpoint_held``)."""


def in_transaction(conn: asyncpg.Connection) -> AbstractAsyncContextManager[Any]:
    """The caller's transaction when there is one (the locks last until it ends), else a new one."""
    return contextlib.nullcontext() if conn.is_in_transaction() else conn.transaction()


async def hold_endpoint(conn: asyncpg.Connection, endpoint_id: str) -> None:
    """Take the endpoint's parking lock shared, until the transaction ends (writers of messages)."""
    await conn.execute(_KEY.format(fn="pg_advisory_xact_lock_shared"), endpoint_id)


async def lock_endpoint(conn: asyncpg.Connection, endpoint_id: str) -> None:
    """Take the endpoint's parking lock exclusively, until the transaction ends (enable, disable)."""
    await conn.execute(_KEY.format(fn="pg_advisory_xact_lock"), endpoint_id)


async def park(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str) -> int:
    """Park the endpoint's pending messages (it was just disabled); how many."""
    status = await conn.execute(
        "UPDATE webhook_messages SET parked = true"
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND state = 'pending' AND NOT parked",
        tenant_id, endpoint_id)
    return int(status.split()[-1])


async def unpark(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, now: datetime) -> int:
    """Unpark the endpoint's pending messages and make them due by ``now`` (it was just enabled); how many."""
    status = await conn.execute(
        "UPDATE webhook_messages SET parked = false, next_attempt_at = least(next_attempt_at, $3)"
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND state = 'pending' AND (parked OR next_attempt_at > $3)",
        tenant_id, endpoint_id, now)
    return int(status.split()[-1])
