"""Fixed-window rate limiting in Redis, atomic across replicas."""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

__all__ = ["hit"]

_SCRIPT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('TTL', KEYS[1])}
"""


_scripts: dict[int, Any] = {}


async def hit(client: aioredis.Redis, key: str, *, limit: int, window_s: int) -> tuple[bool, int]:
    """Count one attempt under ``key``; return (allowed, seconds until the window resets).

    The script is registered once per client and sent by its SHA afterwards (EVALSHA).
    """
    script = _scripts.get(id(client))
    if script is None:
        script = _scripts[id(client)] = client.register_script(_SCRIPT)
    now = int(time.time())
    bucket = now // window_s
    # The counter lives until its window ends, so Retry-After is the true wait.
    count, ttl = await script(keys=[f"rl:{key}:{bucket}"], args=[window_s - now % window_s])
    return int(count) <= limit, max(int(ttl), 1)
