"""One event loop and pool per Celery worker process, made on first use; the delivery fetch policy.

Celery runs beat's periodic jobs (sweeps, retention, DNS re-checks, metering, recovery
jobs); each is a short coroutine run to completion with `run` on the process's own loop,
in the calling thread (no background thread: deliveries no longer run here, see
`frontdoor_dispatcher.deliverer`). The loop and pool persist across tasks so a job does
not open a pool per run; Celery's prefork children each build their own after the fork.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
from frontdoor_core.db import create_pool
from frontdoor_core.outbound import OutboundPolicy
from frontdoor_core.settings import Settings
from frontdoor_webhooks.delivery_policy import webhook_outbound_policy

__all__ = ["WorkerRuntime", "delivery_outbound_policy", "run", "runtime"]

T = TypeVar("T")


@dataclass
class WorkerRuntime:
    """What the periodic jobs need in one worker process."""

    settings: Settings
    pool: asyncpg.Pool


class _Process:
    """This process's loop and runtime; rebuilt in a forked child."""

    loop: asyncio.AbstractEventLoop | None = None
    runtime: WorkerRuntime | None = None
    pid: int | None = None


def _loop() -> asyncio.AbstractEventLoop:
    if _Process.loop is None or _Process.pid != os.getpid():
        _Process.loop = asyncio.new_event_loop()
        _Process.runtime = None
        _Process.pid = os.getpid()
    return _Process.loop


def delivery_outbound_policy(settings: Settings) -> OutboundPolicy:
    """The fetcher policy of deliveries (`frontdoor_webhooks.delivery_policy.webhook_outbound_policy`)."""
    return webhook_outbound_policy(settings)


async def runtime(settings: Settings) -> WorkerRuntime:
    """The process's runtime (created on its loop on first use)."""
    if _Process.runtime is None:
        pool = await create_pool(settings.database_url, min_size=1, max_size=settings.db_pool_max)
        _Process.runtime = WorkerRuntime(settings=settings, pool=pool)
    return _Process.runtime


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on this process's persistent loop, in this thread."""
    return _loop().run_until_complete(coro)
