"""Where a tenant stands: its plan, a failed payment's grace period, what is refused (pure).

Billing off (no Stripe configured): every tenant is unlimited. Otherwise the plan comes
from the account (the default plan when there is none). An unpaid invoice starts a grace
period, during which nothing is refused; only once it has ended are new agent Sessions
refused and new configuration held to the default plan's limits. Signed-in users and
operations already under way are never touched: only new Sessions and new configuration
ask this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

import msgspec

from .accounts import BillingAccount
from .plans import METRICS, Limit, Metric, Plan, PlanCatalogue

__all__ = ["Banner", "Standing", "standing_of"]

Status = Literal["unlimited", "ok", "grace", "suspended"]


class Banner(msgspec.Struct, frozen=True, kw_only=True):
    kind: Literal["over_allowance", "payment_failed", "suspended"]
    metrics: tuple[str, ...] = ()


class Standing(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant's billing standing at one instant."""

    status: Status
    plan: Plan
    default_plan: Plan
    grace_until: datetime | None = None

    @property
    def billing_enabled(self) -> bool:
        return self.status != "unlimited"

    @property
    def sessions_refused(self) -> bool:
        """New agent Sessions are refused only after a grace period ended unpaid."""
        return self.status == "suspended"

    def limit(self, name: Limit) -> int | None:
        """The most ``name`` objects the tenant may own now; None: unlimited."""
        if self.status == "unlimited":
            return None
        if self.status == "suspended":
            plan_limit, default_limit = self.plan.limit(name), self.default_plan.limit(name)
            if plan_limit is None:
                return default_limit
            return plan_limit if default_limit is None else min(plan_limit, default_limit)
        return self.plan.limit(name)

    def over_allowance(self, usage: Mapping[str, int]) -> tuple[Metric, ...]:
        """The metrics of ``usage`` past this plan's monthly allowance."""
        if self.status == "unlimited":
            return ()
        out: list[Metric] = []
        for m in METRICS:
            allowance = self.plan.allowance(m)
            if allowance is not None and usage.get(m, 0) > allowance:
                out.append(m)
        return tuple(out)

    def banners(self, usage: Mapping[str, int]) -> list[Banner]:
        """What the dashboard shows on every page."""
        out: list[Banner] = []
        if self.status == "grace":
            out.append(Banner(kind="payment_failed"))
        elif self.status == "suspended":
            out.append(Banner(kind="suspended"))
        over = self.over_allowance(usage)
        if over and self.plan.overage == "banner":
            out.append(Banner(kind="over_allowance", metrics=over))
        return out


def standing_of(account: BillingAccount | None, catalogue: PlanCatalogue, *, enabled: bool,
                now: datetime) -> Standing:
    """The standing of a tenant with ``account`` at ``now``."""
    default = catalogue.get(catalogue.default_plan)
    if not enabled:
        return Standing(status="unlimited", plan=default, default_plan=default)
    if account is None:
        return Standing(status="ok", plan=default, default_plan=default)
    plan = catalogue.get(account.plan)
    if account.payment_failed_at is not None and account.grace_until is not None:
        status: Status = "grace" if now < account.grace_until else "suspended"
        return Standing(status=status, plan=plan, default_plan=default, grace_until=account.grace_until)
    return Standing(status="ok", plan=plan, default_plan=default)
