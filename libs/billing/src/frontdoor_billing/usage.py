"""Usage counted from the durable truth: the tables each event already lives in.

Nothing here keeps a counter. A Session started is a ``pap_sessions`` row, an operation
an ``operations`` row, a webhook delivery a ``webhook_messages`` row delivered, an active
user a ``sign_ins`` row: each count is a query over the rows of one tenant in a time
window, so it cannot drift from what happened.

Monthly active agents and users are distinct counts over a calendar month. So that the
per-day numbers reported to Stripe add up to the month's (a Stripe meter sums its
events), an agent or user is counted on the first day of the month it was active; the
sum of a month's days is then exactly the month's distinct count.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta

import asyncpg

from .plans import METRICS, Metric

__all__ = ["count", "day_bounds", "month_start", "month_usage", "resource_counts"]

# Each metric: a query over one tenant's rows, $1 tenant, [$2, $3) the window counted and
# $4 the start of the month (first activity of an agent or user this month). The dashboard's
# agent simulator is not usage: its client_ids (simulator_client_ids) are never counted.
_QUERIES: dict[str, str] = {
    "sessions": (
        "SELECT count(*) FROM pap_sessions p WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3"
        " AND NOT EXISTS (SELECT 1 FROM simulator_client_ids s WHERE s.tenant_id = $1 AND s.client_id = p.client_id)"
    ),
    "operations": (
        "SELECT count(*) FROM operations o WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3"
        " AND NOT EXISTS (SELECT 1 FROM simulator_client_ids s WHERE s.tenant_id = $1 AND s.client_id = o.client_id)"
    ),
    "webhook_deliveries": (
        "SELECT count(*) FROM webhook_messages m WHERE tenant_id = $1 AND state = 'delivered'"
        " AND delivered_at >= $2 AND delivered_at < $3"
        # a message about one of the simulator's operations (its perform webhook) is not usage either
        " AND NOT EXISTS (SELECT 1 FROM operations o JOIN simulator_client_ids s ON s.tenant_id = o.tenant_id"
        " AND s.client_id = o.client_id WHERE o.tenant_id = $1 AND o.id = m.operation_id)"
    ),
    "active_agents": """
        WITH seen AS (
            SELECT client_id, created_at FROM pap_sessions WHERE tenant_id = $1 AND created_at >= $4 AND created_at < $3
            UNION ALL
            SELECT client_id, created_at FROM operations WHERE tenant_id = $1 AND created_at >= $4 AND created_at < $3
        )
        SELECT count(*) FROM (SELECT client_id FROM seen GROUP BY client_id HAVING min(created_at) >= $2) first_seen
        WHERE NOT EXISTS (SELECT 1 FROM simulator_client_ids s WHERE s.tenant_id = $1 AND s.client_id = first_seen.client_id)
    """,
    "active_users": """
        SELECT count(*) FROM (
            SELECT account_id FROM sign_ins i WHERE tenant_id = $1 AND created_at >= $4 AND created_at < $3
              AND NOT EXISTS (SELECT 1 FROM simulator_client_ids s WHERE s.tenant_id = $1 AND s.client_id = i.client_id)
            GROUP BY account_id HAVING min(created_at) >= $2
        ) first_seen
    """,
}


def month_start(at: datetime | date) -> datetime:
    """00:00 UTC on the first day of the month of ``at``."""
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """``[00:00, next 00:00)`` UTC of ``day``."""
    start = datetime.combine(day, time(0), tzinfo=UTC)
    return start, start + timedelta(days=1)


async def count(conn: asyncpg.Connection, tenant_id: str, metric: Metric, start: datetime, end: datetime) -> int:
    """``metric`` of one tenant over ``[start, end)``, which must lie within one month."""
    query = _QUERIES[metric]
    extra = (month_start(start),) if "$4" in query else ()
    value = await conn.fetchval(query, tenant_id, start, end, *extra)
    return int(value or 0)


async def month_usage(conn: asyncpg.Connection, tenant_id: str, now: datetime) -> dict[str, int]:
    """Every metric of one tenant from the start of this month until ``now``."""
    start = month_start(now)
    return {m: await count(conn, tenant_id, m, start, now) for m in METRICS}


async def resource_counts(conn: asyncpg.Connection, tenant_id: str) -> Mapping[str, int]:
    """What a tenant owns that a plan limits: domain claims (but failed ones) and webhook endpoints."""
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM domains WHERE tenant_id = $1 AND status <> 'failed') AS domains,"
        " (SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1) AS webhook_endpoints",
        tenant_id,
    )
    return {"domains": int(row["domains"]), "webhook_endpoints": int(row["webhook_endpoints"])}
