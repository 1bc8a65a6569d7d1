"""Endpoints' decrypted signing secrets, kept briefly in the deliverer's memory.

Reading and decrypting an endpoint's secrets for every message costs a query and an AEAD
open per delivery; a busy endpoint gets hundreds a second. `SecretCache` keeps each
endpoint's list for ``ttl`` seconds (a rotation, an expiry or a revoked secret is
therefore seen at most that much later; the entry also ends at the earliest expiry of
the secrets it holds), at most ``max_entries`` endpoints (the oldest entry is dropped
first). Concurrent misses for one endpoint share one read. Only this process holds the
plaintext, as during any attempt; it is never logged.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from datetime import datetime
from typing import Final

import asyncpg
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import ClaimedMessage
from frontdoor_webhooks.endpoint_secrets import signing_secrets

__all__ = ["SECRET_TTL", "SecretCache"]

SECRET_TTL: Final = 5.0


class SecretCache:
    """A `frontdoor_webhooks.delivery.SecretSource` with a short time to live."""

    def __init__(self, kek: Kek, *, ttl: float = SECRET_TTL, max_entries: int = 4096) -> None:
        self._kek = kek
        self._ttl = ttl
        self._max = max_entries
        self._entries: OrderedDict[tuple[str, str], tuple[float, list[str]]] = OrderedDict()
        self._loading: dict[tuple[str, str], asyncio.Future[list[str]]] = {}

    async def __call__(self, pool: asyncpg.Pool, claimed: ClaimedMessage, now: datetime) -> list[str]:
        """The endpoint's secrets valid now (from memory when read less than ``ttl`` ago)."""
        key = (claimed.tenant_id, claimed.endpoint_id)
        hit = self._entries.get(key)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        waiting = self._loading.get(key)
        if waiting is not None:
            return await asyncio.shield(waiting)
        future: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            async with pool.acquire() as conn:
                secrets, soonest = await _read(conn, claimed, self._kek, now)
            ttl = self._ttl if soonest is None else min(self._ttl, max((soonest - now).total_seconds(), 0.0))
            self._entries[key] = (time.monotonic() + ttl, secrets)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
            future.set_result(secrets)
            return secrets
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
            future.exception()  # retrieved: a miss nobody shared must not warn
            raise
        finally:
            del self._loading[key]


async def _read(conn: asyncpg.Connection, claimed: ClaimedMessage, kek: Kek,
                now: datetime) -> tuple[list[str], datetime | None]:
    secrets = await signing_secrets(conn, claimed.tenant_id, claimed.endpoint_id, kek, now)
    soonest = await conn.fetchval(
        "SELECT min(expires_at) FROM webhook_secrets WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at > $3",
        claimed.tenant_id, claimed.endpoint_id, now)
    return secrets, soonest
