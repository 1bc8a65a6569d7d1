"""Claiming due messages in batches: what a deliverer takes on, one lease each.

`claim_due` finds due messages with ``FOR UPDATE SKIP LOCKED`` (deliverers running
together, and the ledger's fast path, take different rows), lets the caller choose which
of them it has room for (its per-endpoint and per-tenant shares), and takes the same
lease `delivery.claim` takes, on exactly those, in the same short transaction. The rows it
did not choose are only unlocked at the commit: nothing is written for them and they stay
due. A claimed message is then attempted with `delivery.deliver` (``claimed=``), whose
settle writes the result only while the lease is still this claim's.

The look-up walks a bounded number of rows of the due index, oldest due first and, when
the caller has endpoints at their share, newest due first as well: a large backlog of
one endpoint (a dead one, every attempt of which waits for the timeout) is never walked
in full to find another tenant's new message behind it, and the query's cost does not
grow with the backlog.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final, Literal

import asyncpg
import msgspec

from .delivery import ClaimedMessage

__all__ = ["Candidate", "claim_due", "extend_lease", "release_claims"]

SCAN: Final = 4
"""Rows of the due index looked at per row wanted (bounded walk)."""

# The candidates are found in the due index alone (a bounded walk), then locked by their
# unique ID: an array, so the plan is an index look-up whatever the table's size (a join
# here let the planner scan the whole table). Only what the caller has room for is locked
# (`rooms`: of each endpoint, as many as it could still take; ``$8`` of any other): a row
# lock is a write, and a pass that locked a batch's worth of a busy endpoint's rows to keep
# the few its share takes cost PostgreSQL more than the claims (bench/README.md). Rows
# another deliverer is claiming at this moment are skipped (SKIP LOCKED); for those, and
# only as many, the endpoint's next rows are taken instead (`spares`: up to its room again),
# so two deliverers claiming at once both get work. The room is applied once more to what
# was locked (a spare may stand in for another endpoint's skipped row). The state is checked
# as `state || ''` on the rows found by ID, never as an index condition (delivery.py, above
# `_SETTLE`).
_FIND = """
WITH candidates AS (
  SELECT w.id, w.next_attempt_at, w.nth <= coalesce(r.room, $8) AS first FROM (
    SELECT id, endpoint_id, next_attempt_at,
           row_number() OVER (PARTITION BY endpoint_id ORDER BY next_attempt_at {order}) AS nth FROM (
      SELECT id, tenant_id, endpoint_id, next_attempt_at FROM webhook_messages
       WHERE state = 'pending' AND NOT parked AND next_attempt_at <= $1
         AND (locked_until IS NULL OR locked_until < $1)
       ORDER BY next_attempt_at {order}
       LIMIT $3) AS walked
     WHERE endpoint_id <> ALL($4::text[]) AND tenant_id <> ALL($5::text[])) AS w
    LEFT JOIN unnest($6::text[], $7::int[]) AS r(endpoint_id, room) ON r.endpoint_id = w.endpoint_id
   WHERE w.nth <= 2 * coalesce(r.room, $8)
), firsts AS (
  SELECT m.tenant_id, m.id, m.endpoint_id, m.next_attempt_at FROM webhook_messages AS m
    JOIN webhook_endpoints AS e ON e.tenant_id = m.tenant_id AND e.id = m.endpoint_id
   WHERE m.id = ANY(ARRAY(SELECT id FROM candidates WHERE first ORDER BY next_attempt_at {order} LIMIT $2))
     AND m.state || '' = 'pending' AND NOT m.parked AND m.next_attempt_at <= $1
     AND (m.locked_until IS NULL OR m.locked_until < $1) AND e.enabled
   ORDER BY m.next_attempt_at {order}
     FOR UPDATE OF m SKIP LOCKED
), spares AS (
  SELECT m.tenant_id, m.id, m.endpoint_id, m.next_attempt_at FROM webhook_messages AS m
    JOIN webhook_endpoints AS e ON e.tenant_id = m.tenant_id AND e.id = m.endpoint_id
   WHERE m.id = ANY(ARRAY(SELECT id FROM candidates WHERE NOT first ORDER BY next_attempt_at {order} LIMIT $2))
     AND m.state || '' = 'pending' AND NOT m.parked AND m.next_attempt_at <= $1
     AND (m.locked_until IS NULL OR m.locked_until < $1) AND e.enabled
   ORDER BY m.next_attempt_at {order}
   LIMIT (SELECT least($2, count(*)) FROM candidates WHERE first) - (SELECT count(*) FROM firsts)
     FOR UPDATE OF m SKIP LOCKED
)
SELECT l.tenant_id, l.id, l.endpoint_id, l.next_attempt_at FROM (
  SELECT u.*, row_number() OVER (PARTITION BY u.endpoint_id ORDER BY u.next_attempt_at {order}) AS nth
    FROM (SELECT * FROM firsts UNION ALL SELECT * FROM spares) AS u) AS l
  LEFT JOIN unnest($6::text[], $7::int[]) AS r(endpoint_id, room) ON r.endpoint_id = l.endpoint_id
 WHERE l.nth <= coalesce(r.room, $8)
 ORDER BY l.next_attempt_at {order}
 LIMIT $2
"""

_LEASE = """
UPDATE webhook_messages AS m
   SET attempts = m.attempts + 1, locked_until = $1::timestamptz + $2::interval
  FROM unnest($3::text[], $4::text[]) AS p(tenant_id, id), webhook_endpoints AS e
 WHERE m.tenant_id = p.tenant_id AND m.id = p.id AND e.tenant_id = m.tenant_id AND e.id = m.endpoint_id
RETURNING m.id, m.tenant_id, m.endpoint_id, m.event_type, m.body, m.purpose, m.operation_id,
          m.attempts AS attempt, m.locked_until, e.url, e.rate_limit_per_second, m.next_attempt_at AS due_at
"""

# A claim's lease renewed, and claims handed back: compare-and-set on the claim, found by its key.
_EXTEND = """
UPDATE webhook_messages SET locked_until = $5::timestamptz + $6::interval
 WHERE id = $2 AND tenant_id || '' = $1 AND state || '' = 'pending' AND attempts = $3 AND locked_until = $4
RETURNING locked_until
"""
_RELEASE = """
UPDATE webhook_messages AS m SET attempts = m.attempts - 1, locked_until = NULL
  FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[]) AS c(t, i, a, lu)
 WHERE m.id = c.i AND m.tenant_id || '' = c.t AND m.state || '' = 'pending' AND m.attempts = c.a AND m.locked_until = c.lu
"""


class Candidate(msgspec.Struct, frozen=True):
    """A due message found and locked, not claimed yet: the caller decides."""

    tenant_id: str
    id: str
    endpoint_id: str


async def claim_due(conn: asyncpg.Connection, now: datetime, lease: timedelta, *, limit: int,
                    choose: Callable[[list[Candidate]], list[Candidate]],
                    exclude_endpoints: Sequence[str] = (), exclude_tenants: Sequence[str] = (),
                    order: Literal["oldest", "newest"] = "oldest",
                    unclaimed: Callable[[Candidate], None] | None = None,
                    rooms: Mapping[str, int] | None = None, room: int | None = None,
                    ) -> tuple[list[tuple[ClaimedMessage, datetime]], int]:
    """Claim what ``choose`` keeps of up to ``limit`` due messages; the claims and how many were found.

    Args:
        now: The claimer's time (due at or before it; the lease runs from it).
        lease: How long each claim lasts (`DeliveryPolicy.lease`).
        limit: At most this many rows are found (and at most ``SCAN`` times as many walked).
        choose: Given the found rows, oldest (or newest) due first, answers those to claim.
        exclude_endpoints: Endpoints (and ``exclude_tenants``: tenants) whose share the
            caller holds: their messages are not found.
        order: ``newest`` walks the due index from its newest end (see the module).
        unclaimed: Called for each chosen row the lease did not take after all (its
            endpoint went away meanwhile), so the caller stops counting it.
        rooms: How many more claims of each endpoint the caller could take (those it holds
            some of); ``room``: of any other endpoint (default: ``limit``). Of the rows
            found and locked, only that many of each endpoint are answered (and counted).

    Each claim comes with the time its message was due (for the lag metric). Messages of
    disabled endpoints are never found (parked, or their endpoint's ``enabled`` false).
    """
    sql = _FIND.format(order="DESC" if order == "newest" else "ASC")
    async with conn.transaction():
        held = rooms or {}
        rows = await conn.fetch(sql, now, limit, limit * SCAN, list(exclude_endpoints), list(exclude_tenants),
                                list(held), list(held.values()), limit if room is None else room)
        found = [Candidate(r["tenant_id"], r["id"], r["endpoint_id"]) for r in rows]
        chosen = choose(found) if found else []
        if not chosen:
            return [], len(found)
        claimed = await conn.fetch(_LEASE, now, lease, [c.tenant_id for c in chosen], [c.id for c in chosen])
    by_id = {r["id"]: r for r in claimed}
    out = []
    for c in chosen:  # in the order found
        r = by_id.get(c.id)
        if r is not None:
            fields = dict(r)
            due_at = fields.pop("due_at")
            out.append((ClaimedMessage(**fields), due_at))
        elif unclaimed is not None:
            unclaimed(c)
    return out, len(found)


async def extend_lease(conn: asyncpg.Connection, claimed: ClaimedMessage, now: datetime,
                       lease: timedelta) -> ClaimedMessage | None:
    """Renew a claim not started yet so a whole attempt fits in it; None when it is no longer ours.

    A claimed message may wait in its deliverer for its endpoint's turn; before it is sent
    its lease must still cover the attempt's timeout. Compare-and-set on the claim (same
    attempt number, same lease end): a claim that expired and was taken by another process
    is never renewed.
    """
    until = await conn.fetchval(
        _EXTEND, claimed.tenant_id, claimed.id, claimed.attempt, claimed.locked_until, now, lease)
    return None if until is None else msgspec.structs.replace(claimed, locked_until=until)


async def release_claims(conn: asyncpg.Connection, claims: Sequence[ClaimedMessage]) -> int:
    """Hand back claims that were never attempted (a deliverer stopping): no attempt used, due as before.

    Compare-and-set on each claim, so one that meanwhile expired and was taken by another
    process is left alone. Answers how many were handed back.
    """
    status = await conn.execute(
        _RELEASE, [c.tenant_id for c in claims], [c.id for c in claims], [c.attempt for c in claims],
        [c.locked_until for c in claims])
    return int(status.split()[-1])
