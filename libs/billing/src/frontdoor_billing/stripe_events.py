"""Stripe's webhooks applied to billing accounts: idempotent by event ID, out-of-order safe.

The caller has already verified the signature over the exact bytes (`gateway.verify_event`).
Each event is applied in one transaction with the insert of its ID: a replay finds the ID
and changes nothing. State is taken from the event's own object and its ``created`` time,
never from the order of arrival: an event older than the part of the account it would
change is recorded and ignored (`transition` is the pure rule).

Handled: ``checkout.session.completed``, ``customer.subscription.created|updated|deleted``,
``invoice.paid`` (and ``invoice.payment_succeeded``, its older twin), ``invoice.payment_failed``.
An invoice that fails to be paid starts a grace period (`BillingConfig.grace_period`) and
tells the company with a ``billing.payment_failed`` webhook event; paying it ends the grace.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import asyncpg
import msgspec
import structlog
from frontdoor_webhooks.event_payloads import payload_for
from frontdoor_webhooks.messages import enqueue_event, next_event_sequence

from .accounts import BillingAccount, ensure_account, find_by_customer, lock_account
from .plans import PlanCatalogue

__all__ = ["HANDLED_TYPES", "Change", "Outcome", "apply_stripe_event", "transition"]

_log = structlog.get_logger("frontdoor.billing")

HANDLED_TYPES = frozenset({
    "checkout.session.completed",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "invoice.paid",
    "invoice.payment_succeeded",
    "invoice.payment_failed",
})
# Subscription statuses that keep the paid plan (a past_due one is in its grace period).
_PAID_STATUSES = frozenset({"active", "trialing", "past_due", "unpaid"})

Outcome = Literal["applied", "stale", "duplicate", "ignored"]


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """The account's columns after an event (only those the event may change)."""

    plan: str
    stripe_customer_id: str | None
    stripe_subscription_id: str | None
    subscription_status: str | None
    subscription_event_at: datetime | None
    payment_failed_at: datetime | None
    grace_until: datetime | None
    invoice_event_at: datetime | None
    grace_started: bool = False


def _as_change(a: BillingAccount) -> Change:
    return Change(plan=a.plan, stripe_customer_id=a.stripe_customer_id,
                  stripe_subscription_id=a.stripe_subscription_id, subscription_status=a.subscription_status,
                  subscription_event_at=a.subscription_event_at, payment_failed_at=a.payment_failed_at,
                  grace_until=a.grace_until, invoice_event_at=a.invoice_event_at)


def _newer(seen: datetime | None, created: datetime) -> bool:
    return seen is None or created >= seen


def transition(account: BillingAccount, event_type: str, obj: dict[str, Any], created: datetime, *,
               catalogue: PlanCatalogue, grace: timedelta) -> Change | None:
    """The account after ``event_type`` with object ``obj`` created at ``created``; None if stale.

    Out of order: each part of the account (subscription, invoice) remembers the
    ``created`` of the newest event that set it, and an older event leaves it alone.
    A canceled subscription stays canceled (Stripe never revives one), and an event about
    another subscription than the current one cannot cancel the current one.
    """
    cur = _as_change(account)
    if event_type == "checkout.session.completed":
        sub = obj.get("subscription")
        if obj.get("mode") != "subscription" or not sub or obj.get("status") not in (None, "complete"):
            return None
        if not _newer(cur.subscription_event_at, created) or (
                cur.stripe_subscription_id == sub and cur.subscription_status == "canceled"):
            # a subscription event already told us more than this one can
            return msgspec.structs.replace(cur, stripe_customer_id=cur.stripe_customer_id or obj.get("customer"))
        return msgspec.structs.replace(
            cur, plan=catalogue.upgrade_plan, stripe_customer_id=cur.stripe_customer_id or obj.get("customer"),
            stripe_subscription_id=str(sub), subscription_status="active", subscription_event_at=created)
    if event_type.startswith("customer.subscription."):
        sub_id = obj.get("id")
        status = "canceled" if event_type.endswith(".deleted") else str(obj.get("status") or "")
        if not _newer(cur.subscription_event_at, created):
            return None
        if cur.stripe_subscription_id == sub_id and cur.subscription_status == "canceled":
            return None
        if (status == "incomplete" and cur.stripe_subscription_id == sub_id
                and cur.subscription_status in _PAID_STATUSES):
            # 'incomplete' is the state before the first payment; a subscription already known paid
            # (its Checkout completed in the same second, say) cannot go back to it, only on to
            # 'incomplete_expired' or another final state (Stripe's subscription lifecycle)
            return None
        if status == "canceled" and cur.stripe_subscription_id not in (None, sub_id):
            return None  # an old subscription ended; the current one goes on
        metadata = obj.get("metadata") or {}
        wanted = metadata.get("frontdoor_plan") if isinstance(metadata, dict) else None
        paid_plan = wanted if wanted in catalogue.plans else catalogue.upgrade_plan
        plan = paid_plan if status in _PAID_STATUSES else catalogue.default_plan
        change = msgspec.structs.replace(cur, plan=plan, stripe_subscription_id=sub_id, subscription_status=status,
                                         subscription_event_at=created)
        if status == "canceled":  # nothing left to pay for: no grace, no suspension
            change = msgspec.structs.replace(change, payment_failed_at=None, grace_until=None)
        return change
    if event_type == "invoice.payment_failed":
        if not _newer(cur.invoice_event_at, created):
            return None
        if cur.payment_failed_at is not None:  # already in grace: the first failure's clock runs on
            return msgspec.structs.replace(cur, invoice_event_at=created)
        return msgspec.structs.replace(cur, payment_failed_at=created, grace_until=created + grace,
                                       invoice_event_at=created, grace_started=True)
    if event_type in ("invoice.paid", "invoice.payment_succeeded"):
        if not _newer(cur.invoice_event_at, created):
            return None
        return msgspec.structs.replace(cur, payment_failed_at=None, grace_until=None, invoice_event_at=created)
    return None


async def _tenant_of(conn: asyncpg.Connection, event_type: str, obj: dict[str, Any]) -> str | None:
    customer = obj.get("customer")
    if isinstance(customer, str):
        tenant = await find_by_customer(conn, customer)
        if tenant is not None:
            return tenant
    if event_type == "checkout.session.completed":
        ref = obj.get("client_reference_id")
        if isinstance(ref, str) and await conn.fetchval("SELECT 1 FROM tenants WHERE id = $1", ref):
            return ref
    return None


async def apply_stripe_event(conn: asyncpg.Connection, event: dict[str, Any], *, catalogue: PlanCatalogue,
                             grace: timedelta, now: datetime, billing_url: str) -> Outcome:
    """Apply one verified Stripe event in the caller's transaction.

    Args:
        event: the event as Stripe sent it (parsed from the verified bytes).
        billing_url: the dashboard's Billing page, named in ``billing.payment_failed``.
    """
    event_id = str(event["id"])
    event_type = str(event.get("type", ""))
    created = datetime.fromtimestamp(int(event["created"]), UTC)
    obj = event.get("data", {}).get("object", {}) or {}
    tenant_id = await _tenant_of(conn, event_type, obj) if event_type in HANDLED_TYPES else None
    inserted = await conn.fetchval(
        "INSERT INTO billing_stripe_events (id, type, tenant_id, created, received_at) VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (id) DO NOTHING RETURNING true",
        event_id, event_type, tenant_id, created, now,
    )
    if not inserted:
        return "duplicate"
    if tenant_id is None:
        _log.info("stripe_event_ignored", stripe_event_id=event_id, stripe_event_type=event_type)
        return "ignored"
    await ensure_account(conn, tenant_id, default_plan=catalogue.default_plan, now=now)
    account = await lock_account(conn, tenant_id)
    assert account is not None
    change = transition(account, event_type, obj, created, catalogue=catalogue, grace=grace)
    if change is None:
        _log.info("stripe_event_stale", stripe_event_id=event_id, stripe_event_type=event_type, tenant_id=tenant_id)
        return "stale"
    await conn.execute(
        "UPDATE billing_accounts SET plan = $2, stripe_customer_id = $3, stripe_subscription_id = $4,"
        " subscription_status = $5, subscription_event_at = $6, payment_failed_at = $7, grace_until = $8,"
        " invoice_event_at = $9, updated_at = $10 WHERE tenant_id = $1",
        tenant_id, change.plan, change.stripe_customer_id, change.stripe_subscription_id, change.subscription_status,
        change.subscription_event_at, change.payment_failed_at, change.grace_until, change.invoice_event_at, now,
    )
    if change.grace_started and change.payment_failed_at is not None and change.grace_until is not None:
        await enqueue_event(conn, tenant_id, "billing.payment_failed", payload_for("billing.payment_failed", {
            "sequence": await next_event_sequence(conn),
            "invoice_id": str(obj.get("id") or ""),
            "amount_due": int(obj.get("amount_due") or 0),
            "currency": str(obj.get("currency") or catalogue.currency),
            "failed_at": _rfc3339(change.payment_failed_at),
            "grace_until": _rfc3339(change.grace_until),
            "billing_url": billing_url,
        }), now)
    _log.info("stripe_event_applied", stripe_event_id=event_id, stripe_event_type=event_type, tenant_id=tenant_id)
    return "applied"


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
