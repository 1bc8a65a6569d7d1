"""A tenant's billing account: its plan and what Stripe last said about it (repository).

Every write that comes from Stripe carries the ``created`` time of its event and only
applies when it is not older than what the row already holds, so events applied out of
order leave the newest state (compare-and-set in the UPDATE itself).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

__all__ = ["BillingAccount", "ensure_account", "find_by_customer", "get_account", "lock_account"]

_COLUMNS = ("tenant_id, plan, stripe_customer_id, stripe_subscription_id, subscription_status, subscription_event_at,"
            " payment_failed_at, grace_until, invoice_event_at, updated_at")


class BillingAccount(msgspec.Struct, frozen=True, kw_only=True):
    tenant_id: str
    plan: str
    stripe_customer_id: str | None
    stripe_subscription_id: str | None
    subscription_status: str | None
    subscription_event_at: datetime | None
    payment_failed_at: datetime | None
    grace_until: datetime | None
    invoice_event_at: datetime | None
    updated_at: datetime


def _account(row: asyncpg.Record | None) -> BillingAccount | None:
    return None if row is None else BillingAccount(**dict(row))


async def get_account(conn: asyncpg.Connection, tenant_id: str) -> BillingAccount | None:
    """The tenant's billing account, or None when it never had one (the default plan)."""
    return _account(await conn.fetchrow(f"SELECT {_COLUMNS} FROM billing_accounts WHERE tenant_id = $1", tenant_id))  # noqa: S608 - column list constant


async def ensure_account(conn: asyncpg.Connection, tenant_id: str, *, default_plan: str, now: datetime) -> None:
    """Create the tenant's account on the default plan unless it exists."""
    await conn.execute(
        "INSERT INTO billing_accounts (tenant_id, plan, updated_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        tenant_id, default_plan, now,
    )


async def lock_account(conn: asyncpg.Connection, tenant_id: str) -> BillingAccount | None:
    """The account locked ``FOR UPDATE`` for the caller's transaction."""
    return _account(await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM billing_accounts WHERE tenant_id = $1 FOR UPDATE", tenant_id))  # noqa: S608


async def find_by_customer(conn: asyncpg.Connection, customer_id: str) -> str | None:
    """The tenant whose Stripe customer is ``customer_id`` (all tenants: Stripe's ID is global)."""
    value = await conn.fetchval("SELECT tenant_id FROM billing_accounts WHERE stripe_customer_id = $1", customer_id)
    return None if value is None else str(value)
