"""What every process opens at start-up and closes at shutdown: pool, Redis, clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg
import redis.asyncio as aioredis

from .clock import Clock, utc_now
from .db import create_pool
from .redis_client import create_redis
from .settings import Settings

__all__ = ["Runtime"]


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
        """Connect to PostgreSQL and Redis as configured."""
        if not settings.database_url or not settings.redis_url:
            raise RuntimeError("DATABASE_URL and REDIS_URL must be set (make run sets them for you)")
        pool = await create_pool(settings.database_url, min_size=settings.db_pool_min, max_size=settings.db_pool_max)
        return cls(settings=settings, pool=pool, redis=create_redis(settings.redis_url), clock=clock or utc_now)

    async def close(self) -> None:
        """Close what this runtime opened (not what a test lent it)."""
        if self.owned:
            await self.redis.aclose()
            await self.pool.close()
