"""Fixed-window rate limiting in Redis, atomic across replicas."""

from __future__ import annotations

import time

import redis.asyncio as aioredis

__all__ = ["hit"]

_SCRIPT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('TTL', KEYS[1])}
"""


async def hit(client: aioredis.Redis, key: str, *, limit: int, window_s: int) -> tuple[bool, int]:
    """Count one attempt under ``key``; return (allowed, seconds until the window resets)."""
    bucket = int(time.time()) // window_s
    count, ttl = await client.eval(_SCRIPT, 1, f"rl:{key}:{bucket}", window_s)
    return int(count) <= limit, max(int(ttl), 1)
