"""Webhook recovery jobs: requeue an endpoint's failed messages in chunks, with progress.

Beat runs ``frontdoor.webhooks.recoveries`` every few seconds; each run works through the
open jobs (``frontdoor_webhooks.recoveries``) for at most ``_BUDGET_S`` seconds, one short
transaction per chunk, so a large recovery never holds a long transaction and a worker
lost mid-way leaves the job where the next run resumes it.
"""

from __future__ import annotations

import structlog
from frontdoor_core.clock import utc_now
from frontdoor_webhooks.recoveries import run_recoveries

from ..celery_app import _settings, app
from ..worker_runtime import run, runtime

_log = structlog.get_logger("frontdoor.dispatcher")
_BUDGET_S = 20.0


async def _recover() -> int:
    rt = await runtime(_settings)
    return await run_recoveries(rt.pool, utc_now, budget_s=_BUDGET_S)


@app.task(name="frontdoor.webhooks.recoveries", ignore_result=True)
def recoveries() -> int:
    """Advance the open recovery jobs."""
    count = run(_recover())
    if count:
        _log.info("webhook_messages_recovered", count=count)
    return count
