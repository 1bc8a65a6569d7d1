"""The Redis client: hot, disposable state only (replay caches, rate limits, codes)."""

from __future__ import annotations

import redis.asyncio as aioredis

__all__ = ["Redis", "create_redis"]

Redis = aioredis.Redis


def create_redis(url: str) -> aioredis.Redis:
    """A client for ``url`` with short timeouts: callers fail closed rather than hang."""
    return aioredis.from_url(
        url,
        socket_timeout=2.0,
        socket_connect_timeout=2.0,
        health_check_interval=15,
        retry_on_timeout=False,
    )
