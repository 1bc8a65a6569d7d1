"""One-time use of assertion and DPoP ``jti`` values, across every replica.

A value is claimed with one atomic ``SET key 1 NX EX ttl`` in Redis: the first claim wins,
any later one within the TTL is a replay. When Redis cannot answer we fail closed
(`Unavailable`, 503): never accept an unchecked ``jti`` (PAP-4.2-06, RFC 9449 §11.1).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.redis_keys import shard

__all__ = ["ReplayCache"]

_SCOPE_TENANT = re.compile("[\x00:]")
"""What ends the tenant ID a claim's scope starts with."""

# KEYS[1..n]: the one-time values, KEYS[n+1]: a fixed-window counter. ARGV[1..n]: their TTLs,
# ARGV[n+1]: the counter's expiry. Every value is claimed (each its own SET NX, as in
# `claim_all`); only when all were fresh is the counter counted (as `rate_limit.hit`).
_CLAIM_THEN_COUNT = """
local n = #KEYS - 1
local out = {}
local fresh = true
for i = 1, n do
  if redis.call('SET', KEYS[i], '1', 'NX', 'EX', ARGV[i]) then out[i] = 1 else out[i] = 0; fresh = false end
end
if fresh then
  local c = redis.call('INCR', KEYS[n + 1])
  if c == 1 then redis.call('EXPIRE', KEYS[n + 1], ARGV[n + 1]) end
  out[n + 1] = c
  out[n + 2] = redis.call('TTL', KEYS[n + 1])
end
return out
"""


class ReplayCache:
    """Namespaced one-time claims."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client
        self._claim_then_count: Any = None

    @staticmethod
    def _key(namespace: str, scope: str, value: str) -> str:
        """``jti:{tenant}:namespace:digest``: a scope starts with its tenant's ID (then NUL or ``:``).

        The tenant is the key's Redis Cluster hash tag, the same as the token endpoint's
        per-agent counter's, so `claim_all_then_count` touches one slot.
        """
        # Hash: jti values are attacker-chosen strings; keep keys short and uniform.
        digest = hashlib.sha256(f"{scope}\x00{value}".encode()).hexdigest()[:40]
        tenant = _SCOPE_TENANT.split(scope, maxsplit=1)[0]
        return f"jti:{shard(tenant)}:{namespace}:{digest}"

    async def claim_all(self, claims: list[tuple[str, str, str, int]]) -> list[bool]:
        """Claim several ``(namespace, scope, value, ttl_s)`` in one round trip.

        Each claim is its own atomic ``SET NX``; the answer says which were first.
        """
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                for namespace, scope, value, ttl in claims:
                    pipe.set(self._key(namespace, scope, value), b"1", nx=True, ex=max(ttl, 1))
                results = await pipe.execute()
        except Exception:
            raise Unavailable("replay_cache_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
        return [bool(r) for r in results]

    async def claim_all_then_count(self, claims: list[tuple[str, str, str, int]], counter: tuple[str, int]
                                   ) -> tuple[list[bool], tuple[int, int] | None]:
        """`claim_all`, then count one hit on ``counter`` (key, expiry) if every value was fresh.

        One round trip (a script sent by its SHA): the token endpoint's replay claims and its
        per-agent Session count together. Returns which values were first and, when all
        were, the counter's value and its TTL; a replay is never counted.
        """
        if self._claim_then_count is None:
            self._claim_then_count = self._redis.register_script(_CLAIM_THEN_COUNT)
        keys = [self._key(namespace, scope, value) for namespace, scope, value, _ in claims]
        args = [max(ttl, 1) for *_, ttl in claims]
        try:
            out = await self._claim_then_count(keys=[*keys, counter[0]], args=[*args, max(counter[1], 1)])
        except Exception:
            raise Unavailable("replay_cache_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
        fresh = [bool(int(x)) for x in out[:len(claims)]]
        count = (int(out[len(claims)]), int(out[len(claims) + 1])) if len(out) > len(claims) else None
        return fresh, count

    async def claim(self, namespace: str, scope: str, value: str, *, ttl_s: int) -> bool:
        """True the first time ``value`` is seen in ``(namespace, scope)`` within ``ttl_s``."""
        try:
            result = await self._redis.set(self._key(namespace, scope, value), b"1", nx=True, ex=max(ttl_s, 1))
        except Exception:
            raise Unavailable("replay_cache_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
        return bool(result)

    async def release(self, namespace: str, scope: str, value: str) -> None:
        """Forget a claim this caller made and could not act on, so that a retry is not a replay.

        Only for a claim whose effect did not happen (its transaction failed): releasing
        one that took effect would let a replay through. Raises `Unavailable` when Redis
        cannot answer (the claim then stays until its TTL).
        """
        try:
            await self._redis.delete(self._key(namespace, scope, value))
        except Exception:
            raise Unavailable("replay_cache_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
