"""Webhook delivery and the operations ledger's periodic jobs.

``frontdoor.webhooks.deliver`` takes a batch of message IDs from the relay and attempts
each at once, concurrently (a slow receiver holds only its own attempt). The delivery
engine's claim makes a duplicate task harmless: one process sends a given attempt. A
perform message's answer is applied to its operation here too.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog
from frontdoor_core.clock import utc_now
from frontdoor_operations import ledger
from frontdoor_operations.perform import perform_message
from frontdoor_webhooks.delivery import deliver as deliver_one
from frontdoor_webhooks.messages import prune

from ..celery_app import _settings, app
from ..worker_runtime import WorkerRuntime, run, runtime

_log = structlog.get_logger("frontdoor.dispatcher")


async def _attempt(rt: WorkerRuntime, message_id: str) -> None:
    purpose = await rt.pool.fetchval("SELECT purpose FROM webhook_messages WHERE id = $1", message_id)
    if purpose == "perform":
        await perform_message(rt.pool, rt.redis, message_id, sender=rt.sender, kek=rt.kek, clock=utc_now,
                              policy=rt.policy)
    elif purpose is not None:
        await deliver_one(rt.pool, message_id, sender=rt.sender, kek=rt.kek, clock=utc_now, policy=rt.policy)


async def _deliver(message_ids: list[str]) -> int:
    rt = await runtime(_settings)
    results = await asyncio.gather(*(_attempt(rt, m) for m in message_ids), return_exceptions=True)
    for message_id, result in zip(message_ids, results, strict=True):
        if isinstance(result, BaseException):
            _log.error("webhook_delivery_error", message_id=message_id, error=type(result).__name__)
    return len(message_ids)


@app.task(name="frontdoor.webhooks.deliver", ignore_result=True, acks_late=True)
def deliver(message_ids: list[str]) -> int:
    """Attempt each message now (those another process holds are skipped)."""
    return run(_deliver([m for m in message_ids if isinstance(m, str)][:500]))


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
    async with rt.pool.acquire() as conn:
        return await prune(conn, datetime.now(UTC), _settings.webhook_retention)


@app.task(name="frontdoor.webhooks.prune", ignore_result=True)
def prune_messages() -> int:
    """Delete delivered and exhausted messages (and their attempts) past the retention period."""
    count = run(_prune())
    if count:
        _log.info("webhook_messages_pruned", count=count)
    return count
