"""Metering: closed days counted into ``billing_usage_daily``, then reported to Stripe once.

`count_closed_days` walks each tenant forward from its high-water mark
(``billing_usage_marks``) to the last closed UTC day, one transaction per tenant and day:
the day's rows and the moved mark commit together, so a crash never skips or doubles a
day, and after an outage the next run catches up on every day missed. A day is closed
``settle`` after midnight, so rows whose transaction began before midnight are in.

`report_usage` sends each pending row to Stripe Billing Meters under the identifier
``{tenant}.{metric}.{day}`` and marks it sent in the same transaction that locked it
(``FOR UPDATE SKIP LOCKED``: two runs at once share the work). A run that dies after
sending and before committing leaves the row pending, and the next run sends the same
identifier again, which Stripe accepts once: usage is billed once.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import asyncpg
import structlog
from frontdoor_core.db import transaction

from .gateway import GatewayError, StripeGateway
from .plans import METRICS, PlanCatalogue
from .usage import count, day_bounds

__all__ = ["count_closed_days", "meter_identifier", "report_usage"]

_log = structlog.get_logger("frontdoor.billing")
SETTLE = timedelta(minutes=15)


def meter_identifier(tenant_id: str, metric: str, day: date) -> str:
    """The meter event's identifier: Stripe's idempotency key, fixed for a tenant, metric and day."""
    return f"{tenant_id}.{metric}.{day.isoformat()}"


async def _count_day(conn: asyncpg.Connection, tenant_id: str, day: date, catalogue: PlanCatalogue,
                     *, billed: bool, now: datetime) -> None:
    start, end = day_bounds(day)
    account_plan = await conn.fetchval("SELECT plan FROM billing_accounts WHERE tenant_id = $1", tenant_id)
    plan = catalogue.get(str(account_plan or catalogue.default_plan))
    customer = await conn.fetchval("SELECT stripe_customer_id FROM billing_accounts WHERE tenant_id = $1", tenant_id)
    for metric in METRICS:
        value = await count(conn, tenant_id, metric, start, end)
        to_bill = billed and customer is not None and plan.metered_price(metric) is not None and value > 0
        await conn.execute(
            "INSERT INTO billing_usage_daily (tenant_id, day, metric, value, counted_at, report)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            tenant_id, day, metric, value, now, "pending" if to_bill else "not_billed",
        )


async def count_closed_days(pool: asyncpg.Pool, catalogue: PlanCatalogue, *, now: datetime, billed: bool,
                            max_days: int = 62) -> int:
    """Count every tenant's closed days since its mark (at most ``max_days`` each per run).

    Args:
        billed: billing is on; off, rows are kept for the dashboard but never reported.

    Returns:
        How many tenant-days were counted.
    """
    last_closed = (now - SETTLE).date() - timedelta(days=1)
    async with pool.acquire() as conn:
        tenants = await conn.fetch(
            "SELECT t.id, t.created_at::date AS since, m.counted_through FROM tenants t"
            " LEFT JOIN billing_usage_marks m ON m.tenant_id = t.id"
            " WHERE m.counted_through IS NULL OR m.counted_through < $1 ORDER BY t.id", last_closed)
    done = 0
    for t in tenants:
        for _ in range(max_days):
            async with transaction(pool) as conn:
                await conn.execute(
                    "INSERT INTO billing_usage_marks (tenant_id, counted_through) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    t["id"], t["since"] - timedelta(days=1))
                mark = await conn.fetchval(
                    "SELECT counted_through FROM billing_usage_marks WHERE tenant_id = $1 FOR UPDATE SKIP LOCKED", t["id"])
                if mark is None or mark >= last_closed:
                    break  # another run holds this tenant, or it is up to date
                day = mark + timedelta(days=1)
                await _count_day(conn, t["id"], day, catalogue, billed=billed, now=now)
                await conn.execute("UPDATE billing_usage_marks SET counted_through = $2 WHERE tenant_id = $1",
                                   t["id"], day)
                done += 1
    return done


async def report_usage(pool: asyncpg.Pool, gateway: StripeGateway, catalogue: PlanCatalogue, *, now: datetime,
                       batch: int = 50, max_batches: int = 100) -> int:
    """Send pending daily usage to Stripe; return how many rows were sent.

    A Stripe error stops the run with what was sent so far committed; the rest waits for
    the next run. Any other failure rolls the batch back: resent later, billed once.
    """
    sent = 0
    for _ in range(max_batches):
        sent_now = 0
        async with transaction(pool) as conn:
            rows = await conn.fetch(
                "SELECT d.tenant_id, d.day, d.metric, d.value, a.stripe_customer_id, a.plan"
                " FROM billing_usage_daily d JOIN billing_accounts a ON a.tenant_id = d.tenant_id"
                " WHERE d.report = 'pending' ORDER BY d.day, d.tenant_id, d.metric LIMIT $1"
                " FOR UPDATE OF d SKIP LOCKED", batch)
            if not rows:
                break
            failed = False
            for r in rows:
                price = catalogue.get(r["plan"]).metered_price(r["metric"])
                if price is None or r["stripe_customer_id"] is None:
                    # the plan changed since the day was counted: nothing to bill for it
                    await conn.execute(
                        "UPDATE billing_usage_daily SET report = 'not_billed' WHERE tenant_id = $1 AND day = $2"
                        " AND metric = $3", r["tenant_id"], r["day"], r["metric"])
                    continue
                _, end = day_bounds(r["day"])
                try:
                    await gateway.meter_event(
                        event_name=price.event, identifier=meter_identifier(r["tenant_id"], r["metric"], r["day"]),
                        customer_id=r["stripe_customer_id"], value=int(r["value"]),
                        timestamp=min(end - timedelta(seconds=1), now))
                except GatewayError as exc:
                    _log.warning("meter_event_failed", tenant_id=r["tenant_id"], metric=r["metric"],
                                 day=r["day"].isoformat(), error=str(exc))
                    failed = True
                    break
                await conn.execute(
                    "UPDATE billing_usage_daily SET report = 'sent', reported_at = $4"
                    " WHERE tenant_id = $1 AND day = $2 AND metric = $3", r["tenant_id"], r["day"], r["metric"], now)
                sent_now += 1
        sent += sent_now
        if failed or len(rows) < batch:
            break
    return sent
