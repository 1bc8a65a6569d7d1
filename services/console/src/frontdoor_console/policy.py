"""The domain lifecycle policy from settings."""

from __future__ import annotations

from frontdoor_core.settings import Settings
from frontdoor_tenancy.domain_claims import policy_from
from frontdoor_tenancy.domains import LifecyclePolicy

__all__ = ["lifecycle_policy"]


def lifecycle_policy(s: Settings) -> LifecyclePolicy:
    """Timings of pending, verified and suspended checks as configured."""
    return policy_from(
        pending_window=s.domain_pending_window,
        pending_recheck=s.domain_pending_recheck,
        recheck=s.domain_recheck_interval,
        grace=s.domain_grace_period,
    )
