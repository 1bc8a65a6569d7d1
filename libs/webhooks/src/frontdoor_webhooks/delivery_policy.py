"""The knobs of delivery, read once from settings: timeout, retries, lease, disabling."""

from __future__ import annotations

from datetime import timedelta

import msgspec
from frontdoor_core.outbound import OutboundPolicy, user_agent
from frontdoor_core.settings import Settings

from .retry_policy import RetryPolicy

__all__ = ["DeliveryPolicy", "webhook_outbound_policy"]

_LEASE_MARGIN = timedelta(seconds=30)


class DeliveryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How deliveries are made.

    Attributes:
        retry: The retry schedule, jitter and Retry-After cap.
        timeout: One attempt's deadline, connect to last byte.
        disable_after: An endpoint whose attempts all failed for this long is disabled.
        lease: How long a claimed message stays reserved to the process sending it;
            longer than ``timeout``, so a live sender never loses its claim. After a
            crash, the message is claimable again once the lease ends.
    """

    retry: RetryPolicy
    timeout: timedelta = timedelta(seconds=15)
    disable_after: timedelta = timedelta(days=5)
    lease: timedelta = timedelta(seconds=45)

    def __post_init__(self) -> None:
        """Refuse a lease a live attempt could outlast.

        Raises:
            ValueError: ``timeout`` is not positive or ``lease`` is not longer.
        """
        if self.timeout <= timedelta(0):
            raise ValueError("timeout must be positive")
        if self.lease <= self.timeout:
            raise ValueError("lease must be longer than timeout")

    @classmethod
    def from_settings(cls, settings: Settings) -> DeliveryPolicy:
        """The policy configured by ``FRONTDOOR_WEBHOOK_*``."""
        return cls(
            retry=RetryPolicy(schedule=settings.retry_schedule(), jitter=settings.webhook_retry_jitter,
                              retry_after_max=settings.webhook_retry_after_max),
            timeout=settings.webhook_timeout,
            disable_after=settings.webhook_disable_after,
            lease=settings.webhook_timeout + (settings.webhook_lease_margin or _LEASE_MARGIN),
        )


def webhook_outbound_policy(settings: Settings) -> OutboundPolicy:
    """The outbound rules of every POST to a tenant's webhook endpoint, whichever process sends it
    (the deliverer, the ledger's perform fast path and first conversation deliveries).

    Tenant endpoints get their own allowlist, ``FRONTDOOR_WEBHOOK_ALLOWLIST``:
    ``FRONTDOOR_OUTBOUND_ALLOWLIST`` (Frontdoor's own fetches of agent metadata) must never
    let a tenant's endpoint reach a private network. The total deadline is
    ``FRONTDOOR_WEBHOOK_TIMEOUT``, so nothing in the client cuts an attempt shorter; connects
    stay bounded by the policy's ``connect_timeout``.
    """
    return OutboundPolicy(allow_http_loopback=settings.is_dev, allowlist=settings.webhook_allowlist_entries(),
                          total_timeout=settings.webhook_timeout.total_seconds(),
                          user_agent=user_agent(settings.console_base_url))
