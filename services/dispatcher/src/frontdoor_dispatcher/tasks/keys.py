"""Daily removal of issuer keys no JWKS publishes any more."""

from __future__ import annotations

import asyncio

import structlog
from frontdoor_core.clock import utc_now
from frontdoor_core.db import create_pool
from frontdoor_tenancy.signing_keys import prune_retired_keys

from ..celery_app import _settings, app

_log = structlog.get_logger("frontdoor.dispatcher")


async def _prune() -> int:
    pool = await create_pool(_settings.database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            return await prune_retired_keys(conn, utc_now())
    finally:
        await pool.close()


@app.task(name="frontdoor.keys.prune_retired", ignore_result=True)
def prune_retired() -> int:
    """Delete retired signing keys past their retention (their private halves included)."""
    count = asyncio.run(_prune())
    if count:
        _log.info("retired_keys_pruned", count=count)
    return count
