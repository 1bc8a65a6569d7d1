"""What every process opens at start-up and closes at shutdown: pool, Redis, clock."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Final

import asyncpg
import redis.asyncio as aioredis
import structlog

from .clock import Clock, utc_now
from .db import create_pool, open_connections
from .redis_client import create_redis, drop_connections
from .settings import Settings

__all__ = ["CLOSE_TIMEOUT_S", "Runtime"]

CLOSE_TIMEOUT_S: Final = 10.0
"""Longest a shutdown waits for Redis or the pool to close gracefully before it cuts them."""

_log = structlog.get_logger("frontdoor.runtime")


@dataclass
class Runtime:
    """Shared handles of one process. Tests build one around their own pool and Redis."""

    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis
    clock: Clock = field(default=utc_now)
    owned: bool = True

    @classmethod
    async def open(cls, settings: Settings, *, clock: Clock | None = None) -> Runtime:
        """Connect to PostgreSQL and Redis as configured, with `FRONTDOOR_DB_POOL_INIT` connections open."""
        if not settings.database_url or not settings.redis_url:
            raise RuntimeError("DATABASE_URL and REDIS_URL must be set (make run sets them for you)")
        pool = await create_pool(settings.database_url, min_size=settings.db_pool_min, max_size=settings.db_pool_max)
        wanted = min(settings.db_pool_init, settings.db_pool_max)
        if wanted > pool.get_size():  # before the lifespan ends, so before /readyz answers
            opened = await open_connections(pool, wanted)
            if opened < wanted:
                _log.warning("db_pool_init_partial", wanted=wanted, opened=opened)
        redis = create_redis(settings.redis_url, cluster=settings.redis_cluster)
        return cls(settings=settings, pool=pool, redis=redis, clock=clock or utc_now)

    async def close(self) -> None:
        """Close what this runtime opened (not what a test lent it), never hanging a shutdown.

        A graceful close waits for connections still in use (a pool connection a cancelled
        request never released, a pub/sub connection mid-read); past `CLOSE_TIMEOUT_S` the
        pool is terminated and Redis' connections dropped, and the cut is logged.
        """
        if not self.owned:
            return
        try:
            await asyncio.wait_for(self.redis.aclose(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            _log.warning("runtime_close_timeout", what="redis", seconds=CLOSE_TIMEOUT_S)
            with contextlib.suppress(Exception):
                await drop_connections(self.redis)
        try:
            await asyncio.wait_for(self.pool.close(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            _log.warning("runtime_close_timeout", what="postgresql", seconds=CLOSE_TIMEOUT_S)
            self.pool.terminate()
