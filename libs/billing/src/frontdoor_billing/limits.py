"""Limits where they bite: new configuration asks here first (new agent Sessions ask
`session_admission.SessionAdmission`, which raises `SessionsSuspended`).

Refusals are domain errors (`LimitReached`, `SessionsSuspended`); each edge renders its
own shape (a 402 problem document for the management API, the protocol's error for the
issuer). Only new things are refused: existing Sessions, signed-in users and operations
under way never call this module.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
from frontdoor_core.errors import DomainError

from .accounts import ensure_account, get_account
from .config import BillingConfig
from .plans import METRIC_LABELS, Limit
from .standing import Standing, standing_of
from .usage import resource_counts

__all__ = ["LimitReached", "SessionsSuspended", "require_room_for", "tenant_standing"]


class LimitReached(DomainError):
    """The plan's hard limit on ``limit`` is reached (402 ``plan_limit_reached``)."""

    kind = "payment_required"

    def __init__(self, limit: Limit, allowed: int, plan: str) -> None:
        super().__init__("plan_limit_reached",
                         f"Your plan ({plan}) allows {allowed} {METRIC_LABELS[limit].lower()}; upgrade to add more.",
                         limit=limit, allowed=allowed, plan=plan)
        self.limit = limit
        self.allowed = allowed
        self.plan = plan


class SessionsSuspended(DomainError):
    """The grace period of an unpaid invoice has ended: new agent Sessions are refused."""

    kind = "payment_required"

    def __init__(self, retry_after: int) -> None:
        super().__init__("billing_suspended", "This company's Frontdoor plan is suspended for an unpaid invoice.")
        self.retry_after = retry_after


async def tenant_standing(conn: asyncpg.Connection, config: BillingConfig, tenant_id: str, *,
                          now: datetime) -> Standing:
    """The tenant's standing now (unlimited when billing is off)."""
    account = await get_account(conn, tenant_id) if config.enabled else None
    return standing_of(account, config.catalogue, enabled=config.enabled, now=now)


async def require_room_for(conn: asyncpg.Connection, config: BillingConfig, tenant_id: str, limit: Limit, *,
                           now: datetime) -> None:
    """Raise `LimitReached` unless the tenant may own one more ``limit`` object.

    Called in the transaction that creates it, after locking the tenant's account row so
    two concurrent creations cannot both take the last place.
    """
    if not config.enabled:
        return
    await ensure_account(conn, tenant_id, default_plan=config.catalogue.default_plan, now=now)
    await conn.execute("SELECT 1 FROM billing_accounts WHERE tenant_id = $1 FOR UPDATE", tenant_id)
    standing = await tenant_standing(conn, config, tenant_id, now=now)
    allowed = standing.limit(limit)
    if allowed is None:
        return
    owned = (await resource_counts(conn, tenant_id))[limit]
    if owned >= allowed:
        raise LimitReached(limit, allowed, standing.plan.name)

