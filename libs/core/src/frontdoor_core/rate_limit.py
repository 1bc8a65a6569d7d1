"""Fixed-window rate limiting in Redis, atomic across replicas."""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

__all__ = ["hit", "window_key"]

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
    redis_key, expire_s = window_key(key, window_s)
    count, ttl = await script(keys=[redis_key], args=[expire_s])
    return int(count) <= limit, max(int(ttl), 1)


def window_key(key: str, window_s: int, now: float | None = None) -> tuple[str, int]:
    """The Redis key counting ``key`` in the current fixed window, and its expiry in seconds.

    For a caller that counts in its own script (the token endpoint counts an agent's Session
    with its replay claims): the same key as `hit`, so both count against one limit.
    """
    t = int(time.time() if now is None else now)
    # The counter lives until its window ends, so Retry-After is the true wait.
    return f"rl:{key}:{t // window_s}", window_s - t % window_s
