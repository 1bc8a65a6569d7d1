"""Recovery as a background job: queue again every failed message of an endpoint since a time.

After an outage a company may have thousands of exhausted messages. Requeuing them in
the request's transaction would hold row locks on all of them for as long as that takes
and answer late, so the request only writes a ``webhook_recoveries`` row (``queued``)
and answers its ID. The dispatcher works through it in chunks (`run_recoveries`), each
its own short transaction that requeues up to ``chunk`` messages in ``(created_at, id)``
order, moves the cursor and counts progress, so a crash mid-way resumes where it
stopped and the company can watch ``requeued`` approach ``total``.

Only messages created before the request (``until``) are part of a job; messages keep
their IDs (the same ``webhook-id``) and get a fresh retry schedule. A superseded message
(the perform message of an operation that is final) is never part of one: the chunk's
``FOR UPDATE`` re-checks it, so one superseded while the job runs is left out too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Literal

import asyncpg
import msgspec
from frontdoor_core.errors import NotFound
from frontdoor_core.ids import new_id
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .messages import NOTIFY_CHANNEL
from .parking import hold_endpoint

__all__ = ["CHUNK", "Recovery", "get_recovery", "run_recovery_chunk", "run_recoveries", "start_recovery"]

CHUNK = 500
"""Messages requeued per transaction."""

_COLUMNS = "id, tenant_id, endpoint_id, since, until, state, total, requeued, created_at, updated_at, finished_at"


class Recovery(msgspec.Struct, frozen=True, kw_only=True):
    """A recovery job and its progress.

    Attributes:
        since: Messages created at or after this are recovered...
        until: ...up to the request's time.
        state: ``queued``, ``running`` or ``done``.
        total: Failed messages found when the job started (None while queued).
        requeued: Messages queued again so far.
    """

    id: str
    tenant_id: str
    endpoint_id: str
    since: datetime
    until: datetime
    state: Literal["queued", "running", "done"]
    total: int | None
    requeued: int
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


def _recovery(row: asyncpg.Record) -> Recovery:
    return Recovery(**dict(row))


async def start_recovery(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, since: datetime,
                         now: datetime) -> Recovery:
    """Queue a recovery of the endpoint's exhausted and aborted messages created since ``since``.

    Raises:
        NotFound: No such endpoint for this tenant.
    """
    try:
        row = await conn.fetchrow(
            "INSERT INTO webhook_recoveries (tenant_id, id, endpoint_id, since, until, created_at, updated_at)"  # noqa: S608
            " VALUES ($1, $2, $3, $4, $5, $5, $5) RETURNING " + _COLUMNS,
            actor.tenant_id, new_id("whr"), endpoint_id, since, now,
        )
    except asyncpg.ForeignKeyViolationError:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.") from None
    await audit.record(conn, actor, "webhook_endpoint.recovered", target_type="webhook_endpoint",
                       target_id=endpoint_id, details={"since": since.isoformat(), "recovery": row["id"]}, at=now)
    return _recovery(row)


async def get_recovery(conn: asyncpg.Connection, tenant_id: str, recovery_id: str) -> Recovery:
    """The job by ID.

    Raises:
        NotFound: ``webhook_recovery_not_found`` (also for another tenant's).
    """
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM webhook_recoveries WHERE tenant_id = $1 AND id = $2",  # noqa: S608
                              tenant_id, recovery_id)
    if row is None:
        raise NotFound("webhook_recovery_not_found", "No such webhook recovery.")
    return _recovery(row)


async def run_recovery_chunk(conn: asyncpg.Connection, now: datetime, *,
                             chunk: int = CHUNK) -> tuple[Recovery, int] | None:
    """Advance the oldest open job no other worker holds by one chunk, in the caller's transaction.

    Returns:
        The job after the chunk and how many messages the chunk requeued, or None when
        no open job is free.
    """
    job = await conn.fetchrow(
        "SELECT tenant_id, id, endpoint_id, since, until, total, cursor_at, cursor_id FROM webhook_recoveries"
        " WHERE state <> 'done' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED")
    if job is None:
        return None
    tenant_id, endpoint_id = job["tenant_id"], job["endpoint_id"]
    await hold_endpoint(conn, endpoint_id)  # requeued parked when the endpoint is disabled (see `parking`)
    total = job["total"]
    if total is None:
        total = await conn.fetchval(
            "SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND endpoint_id = $2"
            " AND created_at >= $3 AND created_at <= $4 AND state IN ('exhausted', 'aborted')"
            " AND superseded_at IS NULL",
            tenant_id, endpoint_id, job["since"], job["until"])
    done = await conn.fetchrow(
        """
        WITH batch AS (
            SELECT id FROM webhook_messages
             WHERE tenant_id = $1 AND endpoint_id = $2 AND created_at >= $3 AND created_at <= $4
               AND state IN ('exhausted', 'aborted') AND superseded_at IS NULL
               AND ($5::timestamptz IS NULL OR (created_at, id) > ($5::timestamptz, $6::text))
             ORDER BY created_at, id
             LIMIT $7
               FOR UPDATE
        ), moved AS (
            UPDATE webhook_messages AS m SET state = 'pending', attempts = 0, next_attempt_at = $8,
                   finished_at = NULL, failed_at = NULL,
                   parked = coalesce((SELECT NOT e.enabled FROM webhook_endpoints AS e
                                       WHERE e.tenant_id = $1 AND e.id = $2), false)
              FROM batch WHERE m.tenant_id = $1 AND m.id = batch.id
            RETURNING m.id, m.created_at
        )
        SELECT count(*) AS n, (array_agg(created_at ORDER BY created_at DESC, id DESC))[1] AS last_at,
               (array_agg(id ORDER BY created_at DESC, id DESC))[1] AS last_id
          FROM moved
        """,
        tenant_id, endpoint_id, job["since"], job["until"], job["cursor_at"], job["cursor_id"], chunk, now,
    )
    moved = int(done["n"])
    finished = moved < chunk
    row = await conn.fetchrow(
        "UPDATE webhook_recoveries SET total = $3, requeued = requeued + $4, state = $5::text,"  # noqa: S608
        " cursor_at = coalesce($6::timestamptz, cursor_at), cursor_id = coalesce($7::text, cursor_id),"
        " updated_at = $8::timestamptz, finished_at = CASE WHEN $5::text = 'done' THEN $8::timestamptz END"
        " WHERE tenant_id = $1 AND id = $2 RETURNING " + _COLUMNS,
        tenant_id, job["id"], max(total, moved), moved, "done" if finished else "running",
        done["last_at"], done["last_id"], now,
    )
    if moved:
        await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, done["last_id"])
    return _recovery(row), moved


async def run_recoveries(pool: asyncpg.Pool, clock: Callable[[], datetime], *, chunk: int = CHUNK,
                         budget_s: float = 20.0) -> int:
    """The worker's job: advance open recoveries chunk by chunk for up to ``budget_s`` seconds.

    Returns:
        How many messages were requeued.
    """
    requeued = 0
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        async with pool.acquire() as conn, conn.transaction():
            step = await run_recovery_chunk(conn, clock(), chunk=chunk)
        if step is None:
            break
        requeued += step[1]
    return requeued
