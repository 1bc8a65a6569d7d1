"""Webhook delivery and the operations ledger's periodic jobs.

``frontdoor.webhooks.deliver`` takes a batch of message IDs from the relay and starts an
attempt at each, concurrently, on the process's background loop, and returns at once: the
process takes its next batch while the attempts carry on, so a receiver that times out
holds only its own attempts, never the worker. At most ``MAX_IN_FLIGHT`` attempts run per
process and at most ``PER_ENDPOINT`` to one endpoint (`admission`), so one tenant's dead
endpoint does not delay another tenant's deliveries: a message beyond either cap is handed
back (due again shortly, no attempt used) for the relay to offer again, and the task never
waits for room. An attempt cut short by the process dying is not lost: its lease ends and
the relay hands the message on again. The delivery engine's claim makes a duplicate task
harmless: one process sends a given attempt. A perform message's answer is applied to its
operation here. Every 5 minutes finished messages past the retention are pruned (in chunks,
within a time budget); hourly, forwarded outbox rows.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

import structlog
from celery.signals import worker_process_shutdown
from frontdoor_core.clock import utc_now
from frontdoor_operations import ledger
from frontdoor_operations.perform import perform_message
from frontdoor_webhooks.delivery import RedisThrottle
from frontdoor_webhooks.delivery import deliver as deliver_one

from ..admission import InFlight, start_attempts
from ..celery_app import _settings, app
from ..message_pruning import prune_messages as prune_finished_messages
from ..outbox_pruning import prune_outboxes
from ..worker_runtime import WorkerRuntime, run, runtime

_log = structlog.get_logger("frontdoor.dispatcher")


class _Process:
    """This process's running attempts (touched only from its loop); rebuilt in a forked child."""

    in_flight: InFlight | None = None
    pid: int | None = None


def _in_flight() -> InFlight:
    if _Process.in_flight is None or _Process.pid != os.getpid():
        _Process.in_flight, _Process.pid = InFlight(), os.getpid()
    return _Process.in_flight


async def _attempt(rt: WorkerRuntime, message_id: str, purpose: str | None) -> None:
    throttle = RedisThrottle(rt.redis)  # endpoints' rate_limit_per_second, across every worker
    if purpose == "perform":
        await perform_message(rt.pool, rt.redis, message_id, sender=rt.sender, kek=rt.kek, clock=utc_now,
                              policy=rt.policy, throttle=throttle)
    elif purpose is not None:
        await deliver_one(rt.pool, message_id, sender=rt.sender, kek=rt.kek, clock=utc_now, policy=rt.policy,
                          throttle=throttle)


async def _logged(rt: WorkerRuntime, message_id: str, purpose: str | None) -> None:
    try:
        await _attempt(rt, message_id, purpose)
    except Exception as exc:  # the lease ends and the relay hands the message on again
        _log.error("webhook_delivery_error", message_id=message_id, error=type(exc).__name__)


async def _deliver(message_ids: list[str]) -> int:
    rt = await runtime(_settings)
    admitted = await start_attempts(  # not waited for: a slow receiver must not hold this worker
        rt.pool, message_ids, _in_flight(), lambda message_id, purpose: _logged(rt, message_id, purpose),
        clock=utc_now, hand_back_within=rt.policy.timeout.total_seconds())
    return len(admitted.started)


async def _drain(timeout: float) -> None:  # noqa: ASYNC109 - a budget for shutdown
    in_flight = _Process.in_flight
    if in_flight is not None and in_flight.tasks:
        await asyncio.wait(set(in_flight.tasks), timeout=timeout)


@worker_process_shutdown.connect
def _finish_attempts(**_: object) -> None:
    """On a clean stop, let running attempts end (bounded by the webhook timeout)."""
    if _Process.in_flight is not None and _Process.in_flight.tasks and _Process.pid == os.getpid():
        run(_drain(_settings.webhook_timeout.total_seconds() + 1))


@app.task(name="frontdoor.webhooks.deliver", ignore_result=True, acks_late=True)
def deliver(message_ids: list[str]) -> int:
    """Start an attempt at each message (those another process holds are skipped)."""
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
