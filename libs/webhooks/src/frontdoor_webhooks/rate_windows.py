"""Endpoints' ``rate_limit_per_second``, counted in PostgreSQL across every sender.

One row per rate-limited endpoint holds a fixed one-second window (by the database's
clock, so every deliverer replica and the ledger's fast path count against the same
window) and the sends it let through. Taking a token is one upsert: a window that has
passed starts over at 1, the current one counts up; over the limit the caller waits for
the next window. The upsert serialises on the endpoint's row, so the limit holds however
many processes send at once (a send refused still counts, as with any fixed window).
Only endpoints with a limit pay this round trip. Like the Redis counter it replaces, it
fails open: a rate limit is a courtesy to the receiver, never a reason to lose a delivery.
"""

from __future__ import annotations

import asyncpg
from frontdoor_core.logging import get_logger

__all__ = ["PgThrottle"]

_log = get_logger("frontdoor.webhooks")

_TAKE = """
INSERT INTO webhook_rate_windows AS w (endpoint_id, window_start, used)
VALUES ($1, date_trunc('second', clock_timestamp()), 1)
ON CONFLICT (endpoint_id) DO UPDATE SET
    used = CASE WHEN w.window_start < EXCLUDED.window_start THEN 1 ELSE w.used + 1 END,
    window_start = greatest(w.window_start, EXCLUDED.window_start)
RETURNING used, extract(epoch FROM (window_start + interval '1 second' - clock_timestamp())) AS left_s
"""


class PgThrottle:
    """`frontdoor_webhooks.delivery.Throttle` over `webhook_rate_windows`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def wait(self, endpoint_id: str, per_second: int) -> float:
        """Seconds to wait before sending to ``endpoint_id`` (0: send now, and it counts)."""
        try:
            row = await self._pool.fetchrow(_TAKE, endpoint_id)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            _log.warning("webhook_rate_window_unavailable", error=type(exc).__name__)
            return 0.0
        if row is None or int(row["used"]) <= per_second:
            return 0.0
        return max(float(row["left_s"]), 0.001)
