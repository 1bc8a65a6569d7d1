"""Retention: forgetting conversation events older than each tenant's ``retention_days``.

The dispatcher's beat runs `forget_expired` every few minutes. Each tenant with
conversations is read once; its events written before ``now - retention_days`` are
forgotten in chunks (one short transaction each, `store.forget_older_than`), within a
time budget, so a large backlog is worked off over several runs without long locks. A
forgotten event keeps its ID as a tombstone: a cursor at it answers ``410 cursor_expired``
(PAP-7.5-04) and the reader starts again from the first kept event. The last event of
each conversation is kept, so a reader always learns where it stands.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

import asyncpg
import structlog
from frontdoor_core.errors import NotFound
from frontdoor_tenancy import issuer_settings

from .store import forget_older_than

__all__ = ["BUDGET_SECONDS", "CHUNK", "forget_expired"]

CHUNK: Final = 2_000
BUDGET_SECONDS: Final = 50.0
_log = structlog.get_logger("frontdoor.conversations")


async def _retention_days(conn: asyncpg.Connection, tenant_id: str) -> int:
    stored = await issuer_settings.get_settings(conn, tenant_id)
    return int(stored.settings.conversations.retention_days)


async def forget_expired(pool: asyncpg.Pool, now: datetime, *, chunk: int = CHUNK,
                         budget_seconds: float = BUDGET_SECONDS,
                         monotonic: Callable[[], float] = time.monotonic) -> int:
    """Forget every tenant's events past its retention; return how many were forgotten.

    A tenant's setting applies whether hosted conversations are on or off now (its
    transcripts stay only as long as it said). Stops at the budget; the next run goes on.
    """
    deadline = monotonic() + budget_seconds
    async with pool.acquire() as conn:
        tenants = [r["tenant_id"] for r in await conn.fetch(
            "SELECT t.id AS tenant_id FROM tenants t WHERE EXISTS"
            " (SELECT 1 FROM conversation_events e WHERE e.tenant_id = t.id AND e.payload IS NOT NULL)"
            " ORDER BY t.id")]
    total = 0
    for tenant_id in tenants:
        async with pool.acquire() as conn:
            try:
                days = await _retention_days(conn, tenant_id)
            except NotFound:  # no settings row (a tenant mid-deletion): nothing to go by
                _log.warning("conversations.retention_unreadable", tenant_id=tenant_id)
                continue
            before = now - timedelta(days=days)
            while True:
                forgotten = await forget_older_than(conn, tenant_id, before, now=now, limit=chunk)
                total += forgotten
                if forgotten < chunk or monotonic() >= deadline:
                    break
        if monotonic() >= deadline:
            break
    if total:
        _log.info("conversations.events_forgotten", count=total)
    return total
