"""The deliverer's Prometheus metrics, beside the shared ones it also feeds.

Served on ``FRONTDOOR_METRICS_PORT`` by `frontdoor_core.metrics.metrics_listener`:

- ``frontdoor_webhook_deliveries_total{purpose,state,error_class}`` (shared; counted by
  the delivery engine for every attempt): deliveries by outcome.
- ``frontdoor_webhook_claim_delay_seconds``: from when a message was due to when this
  deliverer claimed it (a histogram: the delivery lag each message saw).
- ``frontdoor_webhook_delivery_lag_seconds`` and ``frontdoor_outbox_depth{table}``
  (shared gauges, sampled every 15 s): age of the oldest due message, backlog depth.
- ``frontdoor_deliverer_held_claims``: claims this process holds (running or waiting).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
from frontdoor_core.metrics import DELIVERY_LAG, OUTBOX_DEPTH, sample_pool
from frontdoor_webhooks.backlog import backlog
from prometheus_client import Gauge, Histogram

__all__ = ["CLAIM_DELAY", "HELD", "sample_backlog"]

CLAIM_DELAY = Histogram(
    "frontdoor_webhook_claim_delay_seconds", "Time from a webhook message being due to a deliverer claiming it.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)
HELD = Gauge("frontdoor_deliverer_held_claims", "Claimed webhook messages this deliverer holds (running or waiting).",
             multiprocess_mode="livesum")


async def sample_backlog(pool: asyncpg.Pool, now: datetime) -> None:
    """Backlog depth and the oldest due message's age (cluster-wide: aggregate with ``max``)."""
    async with pool.acquire() as conn:
        found = await backlog(conn, now)
    OUTBOX_DEPTH.labels("webhook_messages").set(found.due)
    DELIVERY_LAG.set(found.lag_seconds)
    sample_pool(pool, "deliverer")
