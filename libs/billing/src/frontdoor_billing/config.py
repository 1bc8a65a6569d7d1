"""Billing's configuration, from the shared settings: on only when Stripe is configured."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .gateway import StripeGateway
from .plans import PlanCatalogue, load_plans

__all__ = ["BillingConfig"]


@dataclass(frozen=True)
class BillingConfig:
    """What every billing use case needs.

    Attributes:
        enabled: ``STRIPE_API_KEY`` and ``STRIPE_WEBHOOK_SECRET`` are both set. Off, every
            tenant is unlimited and nothing is sent to Stripe.
        catalogue: the plans (`plans.toml`, or ``FRONTDOOR_BILLING_PLANS_FILE``).
        gateway: Stripe, when enabled.
    """

    enabled: bool
    catalogue: PlanCatalogue
    grace_period: timedelta
    webhook_secret: str
    webhook_tolerance: int
    gateway: StripeGateway | None

    @classmethod
    def from_settings(cls, settings: Any) -> BillingConfig:
        catalogue = load_plans(settings.billing_plans_file or None)
        enabled = bool(settings.stripe_api_key and settings.stripe_webhook_secret)
        gateway = StripeGateway(settings.stripe_api_key, api_base=settings.stripe_api_base) if enabled else None
        return cls(enabled=enabled, catalogue=catalogue, grace_period=settings.billing_grace_period,
                   webhook_secret=settings.stripe_webhook_secret,
                   webhook_tolerance=int(settings.stripe_webhook_tolerance.total_seconds()), gateway=gateway)
