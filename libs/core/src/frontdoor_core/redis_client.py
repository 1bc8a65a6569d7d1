"""The Redis client: hot, disposable state only (replay caches, rate limits, codes)."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from .metrics import REDIS_ERRORS

__all__ = ["Redis", "create_redis"]

Redis = aioredis.Redis


class _CountingRedis(aioredis.Redis):
    """Counts failed commands in ``frontdoor_redis_errors_total`` by command name (not its keys)."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except RedisError:
            name = args[0] if args else "unknown"
            REDIS_ERRORS.labels(str(name.decode() if isinstance(name, bytes) else name).split(" ", 1)[0].upper()).inc()
            raise


def create_redis(url: str) -> aioredis.Redis:
    """A client for ``url`` with short timeouts: callers fail closed rather than hang."""
    client: aioredis.Redis = _CountingRedis.from_url(
        url,
        socket_timeout=2.0,
        socket_connect_timeout=2.0,
        health_check_interval=15,
        retry_on_timeout=False,
    )
    return client
