"""The agent funnel's rollup: every tenant's closed days counted into ``agent_funnel_daily``.

Safe to run twice at once and after a crash (each tenant-day commits with its high-water
mark, taken ``FOR UPDATE SKIP LOCKED``); it catches up after an outage, a bounded number of
days and tenants per run (`frontdoor_operations.funnel.materialise_closed_days`).
"""

from __future__ import annotations

import asyncio

import structlog
from frontdoor_core.clock import utc_now
from frontdoor_core.db import create_pool
from frontdoor_operations.funnel import materialise_closed_days

from ..celery_app import _settings, app

_log = structlog.get_logger("frontdoor.dispatcher")


async def _rollup() -> int:
    pool = await create_pool(_settings.database_url, min_size=1, max_size=2)
    try:
        return await materialise_closed_days(pool, now=utc_now())
    finally:
        await pool.close()


@app.task(name="frontdoor.analytics.funnel_rollup", ignore_result=True)
def funnel_rollup() -> int:
    """Materialise the funnel's closed days for every tenant behind its mark."""
    days = asyncio.run(_rollup())
    if days:
        _log.info("funnel_rolled_up", tenant_days=days)
    return days
