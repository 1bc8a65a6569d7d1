"""Plans as configuration: `plans.toml` read once, validated by msgspec.

The dashboard, the management API and the enforcement all ask this module; no plan
limit or price is written anywhere else. A plan names hard limits (configuration a
tenant may own: domains, webhook endpoints), monthly allowances of the metered usage
(`Metric`), and for metered plans the price of each unit past the allowance and the
Stripe Billing Meter event it is reported under.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Literal

import msgspec

__all__ = [
    "LIMITS",
    "METRICS",
    "Limit",
    "MeteredPrice",
    "Metric",
    "Plan",
    "PlanCatalogue",
    "load_plans",
]

Metric = Literal["active_agents", "active_users", "sessions", "operations", "webhook_deliveries"]
METRICS: tuple[Metric, ...] = ("active_agents", "active_users", "sessions", "operations", "webhook_deliveries")
Limit = Literal["domains", "webhook_endpoints"]
LIMITS: tuple[Limit, ...] = ("domains", "webhook_endpoints")

METRIC_LABELS: dict[str, str] = {
    "active_agents": "Monthly active agents",
    "active_users": "Monthly active users",
    "sessions": "Sessions started",
    "operations": "Operations performed",
    "webhook_deliveries": "Webhook deliveries",
    "domains": "Domains",
    "webhook_endpoints": "Webhook endpoints",
}


class MeteredPrice(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The price of usage past the allowance: ``price`` per ``per`` units, reported as ``event``."""

    price: int = msgspec.field(default=0)
    per: int = 1
    event: str

    def __post_init__(self) -> None:
        if self.price < 0 or self.per < 1 or not self.event:
            raise ValueError("a metered price needs price >= 0, per >= 1 and an event name")


class Limits(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    domains: int | None = None
    webhook_endpoints: int | None = None


class Allowances(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    active_agents: int | None = None
    active_users: int | None = None
    sessions: int | None = None
    operations: int | None = None
    webhook_deliveries: int | None = None


class Metered(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    active_agents: MeteredPrice | None = None
    active_users: MeteredPrice | None = None
    sessions: MeteredPrice | None = None
    operations: MeteredPrice | None = None
    webhook_deliveries: MeteredPrice | None = None


class Plan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One plan. ``id`` is its key in the file (``free``, ``growth``, ``enterprise``)."""

    id: str = ""
    name: str
    self_serve: bool
    overage: Literal["banner", "metered", "invoiced"]
    monthly_price: int | None = None
    stripe_price: str | None = None
    limits: Limits = msgspec.field(default_factory=Limits)
    allowances: Allowances = msgspec.field(default_factory=Allowances)
    metered: Metered = msgspec.field(default_factory=Metered)

    def limit(self, name: Limit) -> int | None:
        """The most ``name`` objects a tenant on this plan may own; None: unlimited."""
        value: int | None = getattr(self.limits, name)
        return value

    def allowance(self, metric: Metric) -> int | None:
        """The monthly allowance of ``metric``; None: unlimited."""
        value: int | None = getattr(self.allowances, metric)
        return value

    def metered_price(self, metric: Metric) -> MeteredPrice | None:
        value: MeteredPrice | None = getattr(self.metered, metric)
        return value

    def projected_bill(self, usage: Mapping[str, int]) -> int:
        """This plan's price for a month with ``usage``, in the smallest currency unit.

        Units past the allowance are charged per started block of ``per`` units, as a
        Stripe graduated price whose first tier (the allowance) is free charges them.
        """
        total = self.monthly_price or 0
        for metric in METRICS:
            price = self.metered_price(metric)
            allowance = self.allowance(metric)
            if price is None or allowance is None:
                continue
            over = max(0, usage.get(metric, 0) - allowance)
            total += -(-over // price.per) * price.price
        return total


class PlanCatalogue(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every plan, the currency, and which plan a tenant without a subscription is on."""

    currency: str
    plans: dict[str, Plan]
    default_plan: str = "free"
    upgrade_plan: str = "growth"

    def __post_init__(self) -> None:
        for key in (self.default_plan, self.upgrade_plan):
            if key not in self.plans:
                raise ValueError(f"plan {key!r} is not defined")
        if self.plans[self.upgrade_plan].stripe_price is None:
            raise ValueError(f"plan {self.upgrade_plan!r} needs a stripe_price to be bought through Checkout")

    def get(self, plan_id: str) -> Plan:
        """The plan ``plan_id``; an unknown ID (a plan since removed) is the default plan."""
        return self.plans.get(plan_id) or self.plans[self.default_plan]


def load_plans(path: str | Path | None = None) -> PlanCatalogue:
    """Read and validate the plans file (the bundled ``plans.toml`` unless ``path``).

    Raises:
        ValueError: the file does not describe valid plans (the message says where).
    """
    if path:
        text = Path(path).read_text(encoding="utf-8")
    else:
        text = (resources.files("frontdoor_billing") / "plans.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    for key, plan in raw.get("plans", {}).items():
        if isinstance(plan, dict):
            plan["id"] = key
    try:
        return msgspec.convert(raw, PlanCatalogue)
    except msgspec.ValidationError as exc:
        raise ValueError(f"plans file: {exc}") from None
