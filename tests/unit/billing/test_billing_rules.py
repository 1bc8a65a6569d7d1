"""Plans as configuration, Stripe event transitions (out of order, replays), standing (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_billing import BillingAccount, load_plans, standing_of, transition

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
GRACE = timedelta(days=7)
PLANS = load_plans()


def account(**kw: object) -> BillingAccount:
    base: dict[str, object] = dict(tenant_id="ten_a", plan="free", stripe_customer_id="cus_1",
                                   stripe_subscription_id=None, subscription_status=None, subscription_event_at=None,
                                   payment_failed_at=None, grace_until=None, invoice_event_at=None, updated_at=T0)
    base.update(kw)
    return BillingAccount(**base)  # type: ignore[arg-type]


def apply(a: BillingAccount, event_type: str, obj: dict[str, object], at: datetime) -> BillingAccount:
    change = transition(a, event_type, obj, at, catalogue=PLANS, grace=GRACE)
    if change is None:
        return a
    fields = {k: getattr(change, k) for k in change.__struct_fields__ if k != "grace_started"}
    return account(**{**{k: getattr(a, k) for k in a.__struct_fields__}, **fields})


def test_bundled_plans_have_free_growth_enterprise() -> None:
    free, growth, ent = PLANS.get("free"), PLANS.get("growth"), PLANS.get("enterprise")
    assert free.limit("domains") == 1 and free.limit("webhook_endpoints") == 1
    assert free.allowance("sessions") and free.overage == "banner"
    assert growth.stripe_price and growth.metered_price("operations") is not None
    assert ent.limit("domains") is None and not ent.self_serve
    assert PLANS.get("no-such-plan") is free


def test_projected_bill_charges_started_blocks_past_the_allowance() -> None:
    growth = PLANS.get("growth")
    allowance = growth.allowance("operations") or 0
    assert growth.projected_bill({"operations": allowance}) == growth.monthly_price
    price = growth.metered_price("operations")
    assert price is not None
    assert growth.projected_bill({"operations": allowance + 1}) == (growth.monthly_price or 0) + price.price


def test_a_bad_plans_file_is_refused(tmp_path: object) -> None:
    from pathlib import Path

    p = Path(str(tmp_path)) / "plans.toml"
    p.write_text('currency = "usd"\n[plans.free]\nname = "Free"\nself_serve = true\noverage = "banner"\n'
                 '[plans.free.limits]\ndomainz = 1\n')
    with pytest.raises(ValueError, match="plans file"):
        load_plans(p)


def test_subscription_events_out_of_order_keep_the_newest() -> None:
    a = account()
    sub = {"id": "sub_1", "customer": "cus_1", "status": "active"}
    a = apply(a, "customer.subscription.updated", {**sub, "status": "past_due"}, T0 + timedelta(minutes=5))
    # the older 'created' arrives later: ignored
    a = apply(a, "customer.subscription.created", sub, T0)
    assert a.subscription_status == "past_due" and a.plan == "growth"
    a = apply(a, "customer.subscription.deleted", {**sub, "status": "canceled"}, T0 + timedelta(minutes=9))
    assert a.plan == "free" and a.subscription_status == "canceled"
    # an update of the same subscription with the same created cannot revive it
    a = apply(a, "customer.subscription.updated", sub, T0 + timedelta(minutes=9))
    assert a.subscription_status == "canceled"


def test_an_old_subscription_ending_does_not_cancel_the_current_one() -> None:
    a = apply(account(), "customer.subscription.created", {"id": "sub_2", "status": "active"}, T0)
    a = apply(a, "customer.subscription.deleted", {"id": "sub_1", "status": "canceled"}, T0 + timedelta(hours=1))
    assert a.plan == "growth" and a.stripe_subscription_id == "sub_2"


def test_checkout_after_the_subscription_event_changes_nothing_newer() -> None:
    a = apply(account(), "customer.subscription.deleted", {"id": "sub_1", "status": "canceled"}, T0 + timedelta(1))
    a = apply(a, "checkout.session.completed", {"mode": "subscription", "subscription": "sub_1", "customer": "cus_1",
                                                "status": "complete"}, T0)
    assert a.plan == "free"


def test_an_incomplete_subscription_event_of_the_same_second_does_not_undo_a_paid_checkout() -> None:
    """Checkout completes (paid) and the subscription's ``created`` event, snapshotted before the
    first payment (``incomplete``), carries the same ``created`` second and arrives after it."""
    a = apply(account(), "checkout.session.completed", {"mode": "subscription", "subscription": "sub_1",
                                                        "customer": "cus_1", "status": "complete"}, T0)
    assert a.plan == "growth"
    a = apply(a, "customer.subscription.created", {"id": "sub_1", "status": "incomplete"}, T0)
    assert a.plan == "growth" and a.subscription_status == "active"
    # it can still end: incomplete_expired (the first payment never came) is final
    a = apply(a, "customer.subscription.updated", {"id": "sub_1", "status": "incomplete_expired"}, T0 + GRACE)
    assert a.plan == "free"
    # another subscription's first, unpaid state does not give the paid plan
    b = apply(account(), "customer.subscription.created", {"id": "sub_9", "status": "incomplete"}, T0)
    assert b.plan == "free"


def test_failed_payment_grace_then_suspension_then_paid() -> None:
    a = apply(account(plan="growth"), "invoice.payment_failed", {"id": "in_1"}, T0)
    assert a.grace_until == T0 + GRACE
    inside = standing_of(a, PLANS, enabled=True, now=T0 + GRACE - timedelta(seconds=1))
    assert inside.status == "grace" and not inside.sessions_refused and inside.limit("domains") == 10
    after = standing_of(a, PLANS, enabled=True, now=T0 + GRACE)
    assert after.status == "suspended" and after.sessions_refused and after.limit("domains") == 1
    # a second failure does not restart the clock
    a2 = apply(a, "invoice.payment_failed", {"id": "in_1"}, T0 + timedelta(days=3))
    assert a2.grace_until == T0 + GRACE
    # a payment older than the failure is stale; a newer one lifts everything
    assert apply(a, "invoice.paid", {"id": "in_0"}, T0 - timedelta(days=1)).payment_failed_at == T0
    paid = apply(a, "invoice.paid", {"id": "in_1"}, T0 + timedelta(days=8))
    assert standing_of(paid, PLANS, enabled=True, now=T0 + timedelta(days=8)).status == "ok"


def test_billing_off_is_unlimited() -> None:
    s = standing_of(account(payment_failed_at=T0, grace_until=T0), PLANS, enabled=False, now=T0 + GRACE)
    assert s.status == "unlimited" and s.limit("domains") is None and not s.sessions_refused
    assert s.banners({"sessions": 10**9}) == []


def test_free_over_allowance_is_a_banner_not_a_refusal() -> None:
    s = standing_of(None, PLANS, enabled=True, now=T0)
    allowance = PLANS.get("free").allowance("sessions") or 0
    banners = s.banners({"sessions": allowance + 1})
    assert [b.kind for b in banners] == ["over_allowance"] and banners[0].metrics == ("sessions",)
    assert not s.sessions_refused
