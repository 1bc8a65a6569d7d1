"""May this tenant start new agent Sessions? The issuer's per-request question, cached.

After a failed payment's grace period has ended unpaid, new agent Sessions are refused
(`SessionsSuspended`); everything else goes on: Sessions already started are renewed,
signed-in users keep their tokens and refresh them, operations under way finish. Only the
issuer's Session grant asks, and only for a new Session.

The grant runs on every agent request that starts a Session, so the tenant's billing
account is read at most once per ``ttl`` of the injected clock per process (a bounded map by tenant): the
standing itself is recomputed at every call from the cached account and the clock, so a
grace period ends on time; a payment is seen within ``ttl``. Billing off: no query at all.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import asyncpg
from frontdoor_protocol.bounded_cache import BoundedLRU

from .accounts import BillingAccount, get_account
from .config import BillingConfig
from .limits import SessionsSuspended
from .standing import standing_of

__all__ = ["SessionAdmission"]

_NO_ACCOUNT = object()


class SessionAdmission:
    """`check` raises `SessionsSuspended` when a tenant's new Sessions are refused.

    Args:
        pool: the service's pool (one short read on a cache miss).
        config: billing's configuration (off: every tenant is admitted).
        clock: the injected clock the standing is computed at.
        ttl: how long an account read is reused.
        retry_after: seconds the refusal's ``Retry-After`` names.
    """

    def __init__(self, pool: asyncpg.Pool, config: BillingConfig, clock: Callable[[], datetime], *,
                 ttl: timedelta = timedelta(seconds=30), retry_after: int = 3600, max_tenants: int = 10_000) -> None:
        self._pool = pool
        self._config = config
        self._clock = clock
        self._ttl = ttl.total_seconds()
        self._retry_after = retry_after
        self._accounts: BoundedLRU[str, tuple[float, object]] = BoundedLRU(max_tenants)
        self.reads = 0
        """Account reads so far (cache misses): what the cache saves is measurable."""

    async def check(self, tenant_id: str) -> None:
        """Admit or refuse one new Session of ``tenant_id``.

        Raises:
            SessionsSuspended: the grace period of an unpaid invoice has ended.
        """
        if not self._config.enabled:
            return
        now = self._clock()
        account = await self._account(tenant_id, now.timestamp())
        standing = standing_of(account, self._config.catalogue, enabled=True, now=now)
        if standing.sessions_refused:
            raise SessionsSuspended(retry_after=self._retry_after)

    async def refused(self, tenant_id: str) -> int | None:
        """`check` as a value: the ``Retry-After`` seconds when new Sessions are refused, else None.

        The shape `frontdoor_sessions` takes (it knows nothing of billing).
        """
        try:
            await self.check(tenant_id)
        except SessionsSuspended as exc:
            return exc.retry_after
        return None

    async def _account(self, tenant_id: str, now: float) -> BillingAccount | None:
        hit = self._accounts.get(tenant_id)
        if hit is not None and now - hit[0] < self._ttl:
            value = hit[1]
        else:
            async with self._pool.acquire() as conn:
                value = await get_account(conn, tenant_id)
            self.reads += 1
            self._accounts.put(tenant_id, (now, _NO_ACCOUNT if value is None else value))
        return None if value is _NO_ACCOUNT else value  # type: ignore[return-value]
