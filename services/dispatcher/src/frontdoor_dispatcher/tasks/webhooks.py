"""The webhook and operations ledger's periodic jobs (beat schedules them).

Deliveries are not made here: the deliverer (``python -m frontdoor_dispatcher.deliverer``)
claims due messages from PostgreSQL itself (docs/adr/0006-postgres-delivery-queue.md).
Every 30 s proposals whose time ran out are expired; every 5 minutes finished messages
past the retention are pruned (in chunks, within a time budget); hourly, forwarded
outbox rows.
"""

from __future__ import annotations

from datetime import UTC, datetime

import structlog
from frontdoor_operations import ledger

from ..celery_app import _settings, app
from ..message_pruning import prune_messages as prune_finished_messages
from ..outbox_pruning import prune_outboxes
from ..worker_runtime import run, runtime

_log = structlog.get_logger("frontdoor.dispatcher")


async def _expire() -> int:
    rt = await runtime(_settings)
    async with rt.pool.acquire() as conn:
        return await ledger.expire_due(conn, now=datetime.now(UTC))


@app.task(name="frontdoor.operations.expire_due", ignore_result=True)
def expire_due() -> int:
    """Expire proposals whose time ran out (reads expire them lazily too)."""
    count = run(_expire())
    if count:
        _log.info("operations_expired", count=count)
    return count


async def _prune() -> int:
    rt = await runtime(_settings)
    return await prune_finished_messages(rt.pool, datetime.now(UTC), _settings.webhook_retention)


@app.task(name="frontdoor.webhooks.prune", ignore_result=True)
def prune_messages() -> int:
    """Delete finished messages (and their attempts) past the retention period, chunk by chunk."""
    count = run(_prune())
    if count:
        _log.info("webhook_messages_pruned", count=count)
    return count


async def _prune_outboxes() -> dict[str, int]:
    rt = await runtime(_settings)
    return await prune_outboxes(rt.pool, datetime.now(UTC), _settings.webhook_retention)


@app.task(name="frontdoor.events.prune_forwarded", ignore_result=True)
def prune_forwarded_events() -> int:
    """Delete outbox rows (session and tenancy events) forwarded longer ago than the retention period."""
    counts = run(_prune_outboxes())
    if any(counts.values()):
        _log.info("outbox_events_pruned", **counts)
    return sum(counts.values())
