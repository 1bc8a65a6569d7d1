"""Periodic DNS re-verification of domain claims."""

from __future__ import annotations

import asyncio

import structlog
from frontdoor_core.clock import utc_now
from frontdoor_core.db import create_pool
from frontdoor_tenancy.domain_claims import policy_from, run_due_checks
from frontdoor_tenancy.domains import TxtResolver

from ..celery_app import _settings, app

_log = structlog.get_logger("frontdoor.dispatcher")


async def _sweep() -> int:
    s = _settings
    pool = await create_pool(s.database_url, min_size=1, max_size=4)
    try:
        checked = await run_due_checks(
            pool,
            lookup=TxtResolver(nameservers=s.nameservers(), lifetime=s.dns_timeout.total_seconds()),
            now=utc_now(),
            policy=policy_from(pending_window=s.domain_pending_window, pending_recheck=s.domain_pending_recheck,
                               recheck=s.domain_recheck_interval, grace=s.domain_grace_period),
        )
    finally:
        await pool.close()
    return len(checked)


@app.task(name="frontdoor.domains.sweep", ignore_result=True)
def sweep() -> int:
    """Check every claim whose next check is due."""
    count = asyncio.run(_sweep())
    if count:
        _log.info("domains_checked", count=count)
    return count
