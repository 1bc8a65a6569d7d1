"""One-time use of assertion and DPoP ``jti`` values, across every replica.

A value is claimed with one atomic ``SET key 1 NX EX ttl`` in Redis: the first claim wins,
any later one within the TTL is a replay. When Redis cannot answer we fail closed
(`Unavailable`, 503): never accept an unchecked ``jti`` (PAP-4.2-06, RFC 9449 §11.1).
"""

from __future__ import annotations

import hashlib

import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable

__all__ = ["ReplayCache"]


class ReplayCache:
    """Namespaced one-time claims."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client

    @staticmethod
    def _key(namespace: str, scope: str, value: str) -> str:
        # Hash: jti values are attacker-chosen strings; keep keys short and uniform.
        digest = hashlib.sha256(f"{scope}\x00{value}".encode()).hexdigest()[:40]
        return f"jti:{namespace}:{digest}"

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

    async def claim(self, namespace: str, scope: str, value: str, *, ttl_s: int) -> bool:
        """True the first time ``value`` is seen in ``(namespace, scope)`` within ``ttl_s``."""
        try:
            result = await self._redis.set(self._key(namespace, scope, value), b"1", nx=True, ex=max(ttl_s, 1))
        except Exception:
            raise Unavailable("replay_cache_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
        return bool(result)
