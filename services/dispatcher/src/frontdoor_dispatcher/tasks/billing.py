"""Metering to Stripe Billing Meters: count closed days, then report what is pending.

Safe to run twice (the database decides: a tenant-day is counted once behind its
high-water mark, a row is sent under a fixed identifier Stripe accepts once) and it
catches up after an outage (every day since the mark). Billing off: days are still
counted for the dashboard, nothing is sent.
"""

from __future__ import annotations

import asyncio

import structlog
from frontdoor_billing import BillingConfig, count_closed_days, report_usage
from frontdoor_core.clock import utc_now
from frontdoor_core.db import create_pool

from ..celery_app import _settings, app

_log = structlog.get_logger("frontdoor.dispatcher")


async def _meter() -> tuple[int, int]:
    config = BillingConfig.from_settings(_settings)
    pool = await create_pool(_settings.database_url, min_size=1, max_size=2)
    try:
        counted = await count_closed_days(pool, config.catalogue, now=utc_now(), billed=config.enabled)
        sent = 0
        if config.gateway is not None:
            sent = await report_usage(pool, config.gateway, config.catalogue, now=utc_now())
    finally:
        await pool.close()
    return counted, sent


@app.task(name="frontdoor.billing.meter", ignore_result=True)
def meter() -> int:
    """Count every tenant's closed days and send the billable ones to Stripe."""
    counted, sent = asyncio.run(_meter())
    if counted or sent:
        _log.info("billing_metered", days_counted=counted, meter_events_sent=sent)
    return sent
