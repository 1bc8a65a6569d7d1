"""Final operations past retention are deleted, oldest first, in short chunks (ADR 0007, addendum).

An operation may go once it is final (``succeeded``, ``failed``, ``cancelled``, ``expired``:
nothing changes it again) and finished longer ago than ``FRONTDOOR_OPERATION_RETENTION``.
Proposals and operations in progress are never deleted, however old: an operation must stay
readable at least until it is final (OPS-3.2-01), and their outcome is still to come (an
in-progress one flagged for attention is what the company must look at).

What must outlive the row, and why deleting it changes no count:

- **The agent funnel** counts an operation on the days it was proposed, approved and
  finished and its revision 2 was made, each at or before ``finished_at``. A row goes only
  once its tenant's funnel rollup (``agent_funnel_marks``) has closed the day it finished,
  so every day it counts in is read from ``agent_funnel_daily``.
- **Billing** counts operations by the day they were proposed, and a month's active agents
  read the whole month's operations: a row goes only once billing
  (``billing_usage_marks``) has counted every day of the month it was proposed in.
- **Its perform messages** (``webhook_messages.operation_id``: superseded or delivered once
  it is final) go in the same statement, with their attempts (the foreign key cascades); an
  operation one of whose messages is still pending, or was delivered on a day billing has
  not counted, is kept. Its revisions go by the foreign key's cascade. Its ``operation.*``
  event messages carry their whole body and no reference: the webhook prune takes them.
- **The audit log** names an operation by its ID as text, and conversations keep the
  operation as it was said: neither needs the row. After the prune, reading the operation
  answers 404 ``operation_not_found`` on every surface.

The dispatcher's hourly ``frontdoor.retention.operations`` calls `prune_operations` until a
chunk comes back short or the time budget is spent. Each chunk is one statement on the
partial index ``operations_finished`` (migration ``20261231090000``) that locks its rows
``FOR UPDATE SKIP LOCKED``, so two runs at once or a run after a crash are safe.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Final, NamedTuple

import asyncpg

__all__ = ["CHUNK", "FINAL_STATES", "Pruned", "prune_operation_chunk", "prune_operations"]

CHUNK: Final = 2000
"""Operations per statement: each takes its revisions and perform messages (and their attempts) along."""
FINAL_STATES: Final = ("succeeded", "failed", "cancelled", "expired")


class Pruned(NamedTuple):
    """What a prune deleted: operations, and the perform messages that went with them."""

    operations: int = 0
    messages: int = 0


# The marks are the last closed day; an operation may go when it finished before the funnel
# mark's next midnight (UTC), billing counted the whole month it was proposed in, and the day
# each of its perform messages was delivered on (webhook_deliveries). The state
# list is the index's predicate, word for word (the planner proves the partial index applies).
_CHUNK: Final = """
WITH doomed AS (
  SELECT o.tenant_id, o.id FROM operations o
    JOIN agent_funnel_marks m ON m.tenant_id = o.tenant_id
    JOIN billing_usage_marks b ON b.tenant_id = o.tenant_id
  WHERE o.state IN ('succeeded', 'failed', 'cancelled', 'expired')
    AND o.finished_at < $1
    AND o.finished_at < ((m.counted_through + 1)::timestamp AT TIME ZONE 'UTC')
    AND o.created_at < (date_trunc('month', (b.counted_through + 1)::timestamp) AT TIME ZONE 'UTC')
    AND NOT EXISTS (SELECT 1 FROM webhook_messages w WHERE w.tenant_id = o.tenant_id AND w.operation_id = o.id
                      AND (w.state = 'pending'
                           OR w.delivered_at >= ((b.counted_through + 1)::timestamp AT TIME ZONE 'UTC')))
  ORDER BY o.finished_at LIMIT $2
  FOR UPDATE OF o SKIP LOCKED
), messages AS (
  DELETE FROM webhook_messages w USING doomed d
  WHERE w.tenant_id = d.tenant_id AND w.operation_id = d.id AND w.state <> 'pending' RETURNING 1
), gone AS (
  DELETE FROM operations o USING doomed d WHERE o.tenant_id = d.tenant_id AND o.id = d.id RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS operations, (SELECT count(*) FROM messages) AS messages
"""


async def prune_operation_chunk(conn: asyncpg.Connection, now: datetime, retention: timedelta, *,
                                limit: int = CHUNK) -> Pruned:
    """Delete up to ``limit`` of the final operations that finished longest before ``now - retention``."""
    if limit <= 0 or retention <= timedelta(0):
        return Pruned()
    row = await conn.fetchrow(_CHUNK, now - retention, limit)
    return Pruned(operations=int(row["operations"]), messages=int(row["messages"]))


async def prune_operations(pool: asyncpg.Pool, now: datetime, retention: timedelta, *, budget_s: float = 50.0,
                           limit: int = CHUNK) -> Pruned:
    """`prune_operation_chunk` until a chunk is short or ``budget_s`` passed; answers what was deleted."""
    deadline = time.monotonic() + budget_s
    operations = messages = 0
    while True:
        async with pool.acquire() as conn:
            chunk = await prune_operation_chunk(conn, now, retention, limit=limit)
        operations += chunk.operations
        messages += chunk.messages
        if chunk.operations < limit or time.monotonic() >= deadline:
            return Pruned(operations=operations, messages=messages)
