"""Deletes finished webhook messages (and their attempts) past the retention, chunk after chunk.

Each chunk (`frontdoor_webhooks.messages.prune`, ``chunk`` messages) is its own short
transaction, so locks are held briefly; a run goes on until a chunk deletes fewer than
``chunk`` (nothing more is old enough) or its time ``budget`` is spent, and the next run
(every 5 minutes) carries on. So pruning keeps up with far more than one chunk per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

import asyncpg
from frontdoor_webhooks.messages import prune

__all__ = ["BUDGET", "CHUNK", "prune_messages"]

CHUNK: Final = 10_000
BUDGET: Final = 50.0
"""Seconds one run may spend (beat runs it every 300 s)."""


async def prune_messages(pool: asyncpg.Pool, now: datetime, retention: timedelta, *, chunk: int = CHUNK,
                         budget: float = BUDGET, monotonic: Callable[[], float] = time.monotonic) -> int:
    """Prune chunk by chunk until the backlog is gone or ``budget`` seconds are spent; how many went."""
    deadline = monotonic() + budget
    total = 0
    while True:
        async with pool.acquire() as conn:
            count = await prune(conn, now, retention, limit=chunk)
        total += count
        if count < chunk or monotonic() >= deadline:
            return total
