"""The agent funnel: per agent (``client_id``) and per UTC day, how far agents get with a
tenant's users, counted from the rows already recorded (no second source of truth).

Each count is taken on the day its event happened, from the timestamp its row carries:

==========================  ==========================================================
``sessions``                Sessions started (``pap_sessions.created_at``)
``prompted``                Device and Direct Sign-Ins prompted: a device authorization
                            started, an authorize request accepted
                            (``sign_in_attempts.created_at``)
``sign_ins``                sign-ins completed, Device, Direct or Mediated (``sign_ins.created_at``)
``abandoned_before_login``  attempts that ended (denied, or undecided at ``expires_at``)
                            before the browser reached the company's login page (the
                            user code was never entered)
``abandoned_login``         ... at the company's login page or its IdP: no account was
                            vouched for, or the IdP refused
``abandoned_consent``       ... at Frontdoor's consent page: denied, or left undecided
``abandoned_step_up``       ... at the consent page of a step-up: the agent already held a
                            live sign-in of the account the login vouched for and asked it
                            for more (``sign_in_attempts.step_up``, PAP §4.4); not counted
                            in ``abandoned_consent``
``proposed``                operations proposed (``operations.created_at``)
``approved``                operations approved, by the user or a standing permission (``confirmed_at``)
``performed``               operations that succeeded (``finished_at`` of a ``succeeded`` one)
``failed``                  operations that failed (``finished_at`` of a ``failed`` one)
``revised``                 operations whose terms the company revised (their revision 2's
                            ``created_at``): an agent confirming the older revision is
                            refused ``terms_changed`` (OPS-3.1-01)
``reapproved``              operations approved on a revision after the first (``confirmed_revision > 1``)
==========================  ==========================================================

An abandoned attempt is counted on the day it ended: its decision, or its ``expires_at``
(every attempt of a closed day has ended, so its counts never change). An attempt allowed
at consent is not abandoned; its completion is the agent's ``sign_ins`` (an agent that
never redeems an approval shows as ``prompted`` beyond ``sign_ins`` and the abandoned).
A Mediated Sign-In prompts nobody and has no attempt. A step-up (an agent signing in again a
user it is connected to, for more scope) is told apart once the login has named the account:
one abandoned at consent is ``abandoned_step_up``; before that (the code never entered, the
login not finished) nobody knows whose sign-in it was, and it counts where it stopped.

The dashboard's agent simulator is not an agent bringing customers: its client IDs
(``simulator_client_ids``) are left out of every count.

An event's timestamp never changes, so a closed day's counts never change either: the
beat task (`materialise_closed_days`) writes them once into ``agent_funnel_daily`` behind
the per-tenant mark ``agent_funnel_marks``, and `read_funnel` adds the days after the mark
(today, or a backlog) live. Outcomes still unknown (an operation in progress flagged for
attention, `overview.is_stuck`) are a current state, not an event: they are counted live.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from typing import Final

import asyncpg
import msgspec
from frontdoor_core.db import transaction

__all__ = ["METRICS", "SETTLE", "AgentFunnel", "FunnelView", "count_events", "materialise_closed_days", "read_funnel"]

METRICS: Final = ("sessions", "prompted", "sign_ins", "abandoned_before_login", "abandoned_login", "abandoned_consent",
                  "abandoned_step_up", "proposed", "approved", "performed", "failed", "revised", "reapproved")
SETTLE: Final = timedelta(minutes=5)
"""A day is closed this long after its UTC midnight (a transaction open at midnight has committed)."""

# Every branch reads one tenant's rows in [$2, $3): one event per row, tagged with its metric.
_EVENTS: Final = """
SELECT (date_trunc('day', at AT TIME ZONE 'UTC'))::date AS day, client_id, metric, count(*) AS n FROM (
  SELECT created_at AS at, client_id, 'sessions' AS metric FROM pap_sessions
    WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
  UNION ALL SELECT created_at, client_id, 'sign_ins' FROM sign_ins
    WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
  UNION ALL SELECT created_at, client_id, 'prompted' FROM sign_in_attempts
    WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
  UNION ALL SELECT coalesce(decided_at, expires_at), client_id, CASE
      WHEN consent_at IS NOT NULL AND step_up THEN 'abandoned_step_up' WHEN consent_at IS NOT NULL THEN 'abandoned_consent'
      WHEN login_at IS NOT NULL THEN 'abandoned_login' ELSE 'abandoned_before_login' END FROM sign_in_attempts
    WHERE tenant_id = $1 AND allowed IS NOT TRUE
      AND coalesce(decided_at, expires_at) >= $2 AND coalesce(decided_at, expires_at) < $3
  UNION ALL SELECT created_at, client_id, 'proposed' FROM operations
    WHERE tenant_id = $1 AND created_at >= $2 AND created_at < $3
  UNION ALL SELECT confirmed_at, client_id, 'approved' FROM operations
    WHERE tenant_id = $1 AND confirmed_at >= $2 AND confirmed_at < $3
  UNION ALL SELECT confirmed_at, client_id, 'reapproved' FROM operations
    WHERE tenant_id = $1 AND confirmed_revision > 1 AND confirmed_at >= $2 AND confirmed_at < $3
  UNION ALL SELECT finished_at, client_id, CASE state WHEN 'succeeded' THEN 'performed' ELSE 'failed' END FROM operations
    WHERE tenant_id = $1 AND state IN ('succeeded', 'failed') AND finished_at >= $2 AND finished_at < $3
  UNION ALL SELECT r.created_at, o.client_id, 'revised' FROM operation_revisions r
    JOIN operations o ON o.id = r.operation_id AND o.tenant_id = r.tenant_id
    WHERE r.tenant_id = $1 AND r.revision = 2 AND r.created_at >= $2 AND r.created_at < $3
) events
WHERE NOT EXISTS (SELECT 1 FROM simulator_client_ids s WHERE s.tenant_id = $1 AND s.client_id = events.client_id)
GROUP BY 1, 2, 3
"""

# Built from METRICS (module constants) only; every value is a $n parameter.
_UPSERT: Final = (
    f"INSERT INTO agent_funnel_daily (tenant_id, day, client_id, {', '.join(METRICS)})"  # noqa: S608
    f" VALUES ($1, $2, $3, {', '.join(f'${i + 4}' for i in range(len(METRICS)))})"
    f" ON CONFLICT (tenant_id, day, client_id) DO UPDATE SET {', '.join(f'{m} = EXCLUDED.{m}' for m in METRICS)}")
_ROLLED_UP: Final = (f"SELECT day, client_id, {', '.join(METRICS)} FROM agent_funnel_daily"  # noqa: S608
                     " WHERE tenant_id = $1 AND day >= $2 AND day <= $3")

Counts = dict[tuple[date, str], dict[str, int]]


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


async def count_events(conn: asyncpg.Connection, tenant_id: str, *, start: datetime, end: datetime) -> Counts:
    """The tenant's events in [start, end) by (UTC day, client_id), every metric present."""
    out: Counts = defaultdict(lambda: dict.fromkeys(METRICS, 0))
    for r in await conn.fetch(_EVENTS, tenant_id, start, end):
        out[(r["day"], r["client_id"])][r["metric"]] = int(r["n"])
    return dict(out)


async def materialise_closed_days(pool: asyncpg.Pool, *, now: datetime, max_days: int = 62,
                                  max_tenants: int = 5_000) -> int:
    """Write every tenant's closed days since its mark into ``agent_funnel_daily``.

    Safe to run twice at once (a tenant's mark is taken ``FOR UPDATE SKIP LOCKED``, a day
    and its mark commit together) and after a crash (it resumes at the mark). A tenant is
    brought at most ``max_days`` forward per run, and a run handles at most
    ``max_tenants`` tenants behind their mark (the oldest marks first), so each run is
    bounded however many tenants there are.

    Returns:
        How many tenant-days were written.
    """
    last_closed = (now - SETTLE).date() - timedelta(days=1)
    async with pool.acquire() as conn:
        tenants = await conn.fetch(
            "SELECT t.id, t.created_at::date AS since FROM tenants t LEFT JOIN agent_funnel_marks m ON m.tenant_id = t.id"
            " WHERE m.counted_through IS NULL OR m.counted_through < $1"
            " ORDER BY m.counted_through NULLS FIRST, t.id LIMIT $2", last_closed, max_tenants)
    done = 0
    for t in tenants:
        for _ in range(max_days):
            async with transaction(pool) as conn:
                await conn.execute("INSERT INTO agent_funnel_marks (tenant_id, counted_through) VALUES ($1, $2)"
                                   " ON CONFLICT DO NOTHING", t["id"], t["since"] - timedelta(days=1))
                mark = await conn.fetchval("SELECT counted_through FROM agent_funnel_marks WHERE tenant_id = $1"
                                           " FOR UPDATE SKIP LOCKED", t["id"])
                if mark is None or mark >= last_closed:
                    break  # another run holds this tenant, or it is up to date
                day = mark + timedelta(days=1)
                counts = await count_events(conn, t["id"], start=_midnight(day), end=_midnight(day + timedelta(days=1)))
                if counts:
                    await conn.executemany(_UPSERT, [(t["id"], d, client, *(c[m] for m in METRICS)) for (d, client), c in counts.items()])
                await conn.execute("UPDATE agent_funnel_marks SET counted_through = $2 WHERE tenant_id = $1",
                                   t["id"], day)
                done += 1
    return done


class AgentFunnel(msgspec.Struct, frozen=True, kw_only=True):
    """One agent's funnel over a period (the metrics of the module docstring); ``unknown`` is
    operations in progress with the outcome unknown now."""

    client_id: str
    sessions: int = 0
    prompted: int = 0
    sign_ins: int = 0
    abandoned_before_login: int = 0
    abandoned_login: int = 0
    abandoned_consent: int = 0
    abandoned_step_up: int = 0
    proposed: int = 0
    approved: int = 0
    performed: int = 0
    failed: int = 0
    revised: int = 0
    reapproved: int = 0
    unknown: int = 0

    def rate(self, part: str, whole: str) -> float | None:
        """``part / whole`` (``revised``/``proposed`` is the terms_changed rate), None when ``whole`` is 0."""
        denominator: int = getattr(self, whole)
        return None if denominator == 0 else getattr(self, part) / denominator


class FunnelView(msgspec.Struct, frozen=True, kw_only=True):
    """The funnel of every agent since ``since`` (a UTC day), and per day for the charts."""

    since: date
    agents: list[AgentFunnel]
    total: AgentFunnel
    by_day: dict[date, dict[str, int]]
    materialised_through: date | None


async def read_funnel(conn: asyncpg.Connection, tenant_id: str, *, since: date, now: datetime) -> FunnelView:
    """The funnel from ``since`` (a UTC day) until ``now``: closed days from the rollup, the rest live."""
    mark = await conn.fetchval("SELECT counted_through FROM agent_funnel_marks WHERE tenant_id = $1", tenant_id)
    counts: Counts = {}
    if mark is not None and mark >= since:
        rows = await conn.fetch(_ROLLED_UP, tenant_id, since, mark)
        counts = {(r["day"], r["client_id"]): {m: int(r[m]) for m in METRICS} for r in rows}
    live_from = max(since, mark + timedelta(days=1)) if mark is not None else since
    counts.update(await count_events(conn, tenant_id, start=_midnight(live_from), end=now + timedelta(microseconds=1)))
    unknown = {r["client_id"]: int(r["n"]) for r in await conn.fetch(
        "SELECT client_id, count(*) AS n FROM operations WHERE tenant_id = $1 AND state = 'in_progress'"
        " AND attention IS NOT NULL AND created_at >= $2 AND NOT EXISTS (SELECT 1 FROM simulator_client_ids s"
        " WHERE s.tenant_id = $1 AND s.client_id = operations.client_id) GROUP BY 1", tenant_id, _midnight(since))}
    per_agent: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(METRICS, 0))
    by_day: dict[date, dict[str, int]] = defaultdict(lambda: dict.fromkeys(METRICS, 0))
    for (day, client), c in counts.items():
        for m in METRICS:
            per_agent[client][m] += c[m]
            by_day[day][m] += c[m]
    agents = sorted((AgentFunnel(client_id=client, unknown=unknown.get(client, 0), **c) for client, c in per_agent.items()),
                    key=lambda a: (-a.sessions, -a.proposed, a.client_id))
    agents += [AgentFunnel(client_id=client, unknown=n) for client, n in sorted(unknown.items()) if client not in per_agent]
    total = AgentFunnel(client_id="", unknown=sum(unknown.values()),
                        **{m: sum(getattr(a, m) for a in agents) for m in METRICS})
    return FunnelView(since=since, agents=agents, total=total, by_day=dict(by_day), materialised_through=mark)
