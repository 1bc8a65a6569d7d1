"""One event loop, pool and Redis client per worker process, made on first use.

Delivery tasks run often and briefly: opening a pool per task would cost more than the
delivery. Celery's prefork children each build their own after the fork. The loop runs
in a background thread of the process, so work started by one task (a delivery waiting
for a slow receiver) goes on while the process takes its next task: `run` waits for a
coroutine, `submit` does not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
import redis.asyncio as aioredis
from frontdoor_core.db import create_pool
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.redis_client import create_redis
from frontdoor_core.settings import Settings
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.sender import SafeSender

__all__ = ["WorkerRuntime", "delivery_outbound_policy", "run"]

T = TypeVar("T")


@dataclass
class WorkerRuntime:
    """What delivery needs in one worker process."""

    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis
    sender: SafeSender
    kek: Kek
    policy: DeliveryPolicy


class _Process:
    """This process's loop and runtime; rebuilt in a forked child."""

    loop: asyncio.AbstractEventLoop | None = None
    runtime: WorkerRuntime | None = None
    pid: int | None = None


def _ensure_loop() -> asyncio.AbstractEventLoop:
    if _Process.loop is None or _Process.pid != os.getpid():
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="frontdoor-worker-loop", daemon=True).start()
        _Process.loop = loop
        _Process.runtime = None
        _Process.pid = os.getpid()
    return _Process.loop


def delivery_outbound_policy(settings: Settings) -> OutboundPolicy:
    """The fetcher policy of deliveries: its total deadline is ``FRONTDOOR_WEBHOOK_TIMEOUT``.

    Each attempt also passes that timeout to `SafeFetcher.post`; the policy's total is the
    same so nothing in the fetcher cuts an attempt shorter. Connects stay bounded by the
    policy's ``connect_timeout``.
    """
    # Tenant webhooks get their own allowlist: FRONTDOOR_OUTBOUND_ALLOWLIST (Frontdoor's
    # own fetches) must not let a tenant's endpoint reach a private network.
    return OutboundPolicy(allow_http_loopback=settings.is_dev, allowlist=settings.webhook_allowlist_entries(),
                          total_timeout=settings.webhook_timeout.total_seconds())


async def runtime(settings: Settings) -> WorkerRuntime:
    """The process's runtime (created in the process's loop on first use)."""
    if _Process.runtime is None:
        pool = await create_pool(settings.database_url, min_size=1, max_size=settings.db_pool_max)
        fetcher = SafeFetcher(delivery_outbound_policy(settings))
        _Process.runtime = WorkerRuntime(settings=settings, pool=pool, redis=create_redis(settings.redis_url),
                                 sender=SafeSender(fetcher), kek=Kek.from_env_value(settings.kek),
                                 policy=DeliveryPolicy.from_settings(settings))
    return _Process.runtime


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on this process's persistent loop; its future, not waited for."""
    return asyncio.run_coroutine_threadsafe(coro, _ensure_loop())


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on this process's persistent loop."""
    return submit(coro).result()
