"""What the admin dashboard reads about operations: counts, the operations stuck in progress,
what changed between revisions, and how their deliveries fare.

An operation is *stuck* when it is ``in_progress`` and either flagged for the admins
(``attention``: the perform webhook's retries ran out with the outcome unknown) or
confirmed longer ago than `STUCK_AFTER` (the company has not answered yet). Every query
is scoped by ``tenant_id``.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Final

import asyncpg
import msgspec

from .ledger import _FROM, _OP_COLS, ListFilters, Operation, Revision, _op

__all__ = [
    "STATES",
    "STUCK_AFTER",
    "DailyOperations",
    "DeliveryHealth",
    "RevisionChange",
    "count_by_state",
    "count_stuck",
    "daily_operations",
    "delivery_health",
    "failed_attempts_by_day",
    "is_stuck",
    "kinds_in_use",
    "list_filtered",
    "revision_changes",
    "term_paths",
]

STUCK_AFTER: Final = timedelta(minutes=5)
STATES: Final = ("proposed", "in_progress", "succeeded", "failed", "cancelled", "expired")


def is_stuck(op: Operation, now: datetime) -> bool:
    """True for an ``in_progress`` operation flagged for attention or confirmed over `STUCK_AFTER` ago."""
    if op.state != "in_progress":
        return False
    return op.attention is not None or (op.confirmed_at is not None and op.confirmed_at <= now - STUCK_AFTER)


_STUCK_SQL: Final = "o.state = 'in_progress' AND (o.attention IS NOT NULL OR o.confirmed_at <= ?)"


async def list_filtered(conn: asyncpg.Connection, tenant_id: str, filters: ListFilters, *, now: datetime,
                        stuck: bool = False, limit: int = 50,
                        before: tuple[datetime, str] | None = None) -> list[Operation]:
    """`ledger.list_operations` with one more filter: ``stuck`` (see `is_stuck`). Newest first."""
    clauses = ["o.tenant_id = $1"]
    args: list[Any] = [tenant_id]

    def add(sql: str, value: Any) -> None:
        args.append(value)
        clauses.append(sql.replace("?", f"${len(args)}"))

    for sql, value in (("o.state = ?", filters.state), ("o.kind = ?", filters.kind),
                       ("o.account_id = ?", filters.account), ("o.client_id = ?", filters.client_id),
                       ("o.created_at >= ?", filters.since), ("o.created_at < ?", filters.until)):
        if value is not None:
            add(sql, value)
    if filters.attention:
        clauses.append("o.attention IS NOT NULL")
    if stuck:
        add(_STUCK_SQL, now - STUCK_AFTER)
    if before is not None:
        args.extend(before)
        clauses.append(f"(o.created_at, o.id) < (${len(args) - 1}, ${len(args)})")
    args.append(min(max(limit, 1), 200))
    rows = await conn.fetch(
        f"SELECT {_OP_COLS}{_FROM} WHERE {' AND '.join(clauses)}"
        f" ORDER BY o.created_at DESC, o.id DESC LIMIT ${len(args)}", *args)
    return [_op(r) for r in rows]


async def count_by_state(conn: asyncpg.Connection, tenant_id: str, *, since: datetime) -> dict[str, int]:
    """How many operations created since ``since`` are in each state (every state present, zeros included).

    An index-only range of ``operations_recent_states``, which includes the state.
    """
    rows = await conn.fetch("SELECT state, count(*) AS n FROM operations WHERE tenant_id = $1 AND created_at >= $2"
                            " GROUP BY state", tenant_id, since)
    found = {r["state"]: int(r["n"]) for r in rows}
    return {state: found.get(state, 0) for state in STATES}


async def count_stuck(conn: asyncpg.Connection, tenant_id: str, *, now: datetime) -> int:
    """How many operations are stuck in progress now (see `is_stuck`).

    Two disjoint counts, each a short index range: confirmed before the cut-off
    (``operations_in_progress``, index-only), and flagged for attention but not counted by
    the first (``operations_attention``). One ``attention IS NOT NULL OR confirmed_at <= $2``
    would read every operation in progress of the tenant.
    """
    return int(await conn.fetchval(
        "SELECT (SELECT count(*) FROM operations WHERE tenant_id = $1 AND state = 'in_progress'"
        "   AND confirmed_at <= $2)"
        " + (SELECT count(*) FROM operations WHERE tenant_id = $1 AND state = 'in_progress'"
        "   AND attention IS NOT NULL AND (confirmed_at IS NULL OR confirmed_at > $2))", tenant_id, now - STUCK_AFTER))


async def kinds_in_use(conn: asyncpg.Connection, tenant_id: str) -> set[str]:
    """The kinds some operation of the tenant has (they cannot be deleted)."""
    rows = await conn.fetch("SELECT DISTINCT kind FROM operations WHERE tenant_id = $1", tenant_id)
    return {r["kind"] for r in rows}


class DeliveryHealth(msgspec.Struct, frozen=True, kw_only=True):
    """How the tenant's webhook deliveries fare.

    Attributes:
        retrying: Messages still pending after at least one failed attempt.
        failed_24h: Messages that ran out of retries or were aborted, created in the last 24 h.
        failed_30d: The same over 30 days.
        failed_attempts_24h: Failed attempts in the last 24 h.
        disabled_endpoints: Endpoints not receiving (manually, gone or failing).
        failing_endpoints: Enabled endpoints whose latest attempts fail.
    """

    retrying: int
    failed_24h: int
    failed_30d: int
    failed_attempts_24h: int
    disabled_endpoints: int
    failing_endpoints: int


async def delivery_health(conn: asyncpg.Connection, tenant_id: str, *, now: datetime) -> DeliveryHealth:
    """Counts for the overview's deliveries tile and its "needs attention" list."""
    row = await conn.fetchrow(
        "SELECT"
        " (SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND state = 'pending' AND failed_at IS NOT NULL)"
        "   AS retrying,"
        " (SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND state IN ('exhausted', 'aborted')"
        "   AND created_at >= $2) AS failed_24h,"
        " (SELECT count(*) FROM webhook_messages WHERE tenant_id = $1 AND state IN ('exhausted', 'aborted')"
        "   AND created_at >= $3) AS failed_30d,"
        " (SELECT count(*) FROM webhook_endpoints e CROSS JOIN LATERAL (SELECT 1 FROM webhook_attempts a"
        "   WHERE a.tenant_id = e.tenant_id AND a.endpoint_id = e.id AND a.started_at >= $2"
        "   AND a.error_class IS NOT NULL) f WHERE e.tenant_id = $1) AS failed_attempts_24h,"
        " (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1 AND NOT enabled) AS disabled_endpoints,"
        " (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1 AND enabled AND failing_since IS NOT NULL)"
        "   AS failing_endpoints",
        tenant_id, now - timedelta(hours=24), now - timedelta(days=30))
    return DeliveryHealth(**{k: int(v) for k, v in dict(row).items()})


# ---------------------------------------------------------------- daily counts


class DailyOperations(msgspec.Struct, frozen=True, kw_only=True):
    """Operations proposed on one UTC day, and of those how many have succeeded or failed by now."""

    proposed: int
    succeeded: int
    failed: int


async def daily_operations(conn: asyncpg.Connection, tenant_id: str, *, since: datetime) -> dict[date, DailyOperations]:
    """Operations created per UTC day since ``since`` (days without one omitted).

    An index-only range of ``operations_recent_states`` (the state is in the index).
    """
    rows = await conn.fetch(
        "SELECT (date_trunc('day', created_at AT TIME ZONE 'UTC'))::date AS day, count(*) AS proposed,"
        " count(*) FILTER (WHERE state = 'succeeded') AS succeeded, count(*) FILTER (WHERE state = 'failed') AS failed"
        " FROM operations WHERE tenant_id = $1 AND created_at >= $2 GROUP BY 1", tenant_id, since)
    return {r["day"]: DailyOperations(proposed=int(r["proposed"]), succeeded=int(r["succeeded"]), failed=int(r["failed"]))
            for r in rows}


async def failed_attempts_by_day(conn: asyncpg.Connection, tenant_id: str, *, since: datetime) -> dict[date, int]:
    """Failed webhook attempts (any event type) per UTC day since ``since``; days without one omitted.

    Attempts are indexed by ``(tenant_id, endpoint_id, started_at)`` and every attempt's
    endpoint exists (deleting an endpoint deletes its messages and their attempts), so the
    query walks the tenant's endpoints and reads one index range per endpoint instead of
    every attempt the tenant ever made.
    """
    rows = await conn.fetch(
        "SELECT (date_trunc('day', a.started_at AT TIME ZONE 'UTC'))::date AS day, count(*) AS n"
        " FROM webhook_endpoints e CROSS JOIN LATERAL ("
        "   SELECT started_at FROM webhook_attempts WHERE tenant_id = e.tenant_id AND endpoint_id = e.id"
        "   AND started_at >= $2 AND error_class IS NOT NULL) a"
        " WHERE e.tenant_id = $1 GROUP BY 1", tenant_id, since)
    return {r["day"]: int(r["n"]) for r in rows}


# ---------------------------------------------------------------- revisions


class RevisionChange(msgspec.Struct, frozen=True, kw_only=True):
    """What a revision changed from the one before it (the first revision changes nothing)."""

    revision: Revision
    summary_changed: bool = False
    terms_changed: list[str] = msgspec.field(default_factory=list)
    approval_changed: bool = False
    expiry_changed: bool = False


def term_paths(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a JSON value by path (``total.amount``, ``items[0].sku``); an empty object or list is a leaf."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, child in value.items():
            out.update(term_paths(child, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, child in enumerate(value):
            out.update(term_paths(child, f"{prefix}[{i}]"))
        return out
    return {prefix or "(terms)": value}


def revision_changes(revs: list[Revision]) -> list[RevisionChange]:
    """Each revision (oldest first) with the term paths and fields that differ from the previous one."""
    out: list[RevisionChange] = []
    previous: Revision | None = None
    for rev in revs:
        if previous is None:
            out.append(RevisionChange(revision=rev))
        else:
            before = term_paths(previous.terms) if previous.terms is not None else {}
            after = term_paths(rev.terms) if rev.terms is not None else {}
            changed = sorted(p for p in before.keys() | after.keys()
                             if p not in before or p not in after or before[p] != after[p])
            out.append(RevisionChange(revision=rev, summary_changed=rev.summary != previous.summary,
                                      terms_changed=changed,
                                      approval_changed=rev.user_approval_required != previous.user_approval_required,
                                      expiry_changed=rev.expires_at != previous.expires_at))
        previous = rev
    return out
