"""Prometheus metrics: what every service counts, and ``/metrics`` on an internal listener.

Labels are bounded sets chosen by code (a grant type Frontdoor knows, an OAuth error
code, a delivery state), never input: no token, tenant or path value becomes a label, so
the series stay few and the scrape holds no secret. Request rate, latency and status per
route template come from Litestar's Prometheus middleware (`frontdoor_httpkit.metrics`).

The listener serves on ``FRONTDOOR_METRICS_PORT`` (0, the default, serves nothing), a port
apart from the public app's, so ``/metrics`` is never reachable through the app's Service
or Ingress. Several granian workers in one container: set ``PROMETHEUS_MULTIPROC_DIR`` to
an empty writable directory before start (prometheus_client's multiprocess mode); each
worker then writes its samples there, the first worker to bind the port serves the sum
of all of them, and the others log that a sibling holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client import multiprocess as _multiprocess
from prometheus_client.registry import REGISTRY

from .logging import get_logger

__all__ = [
    "CONFIRMS",
    "DB_POOL_CONNECTIONS",
    "DELIVERIES",
    "DELIVERY_LAG",
    "INTROSPECTIONS",
    "OUTBOX_DEPTH",
    "REDIS_ERRORS",
    "TOKEN_GRANTS",
    "grant_type_label",
    "metrics_listener",
    "sample_pool",
]

_log = get_logger("frontdoor.metrics")

_GRANT_TYPES = {
    "authorization_code": "authorization_code",
    "refresh_token": "refresh_token",
    "urn:ietf:params:oauth:grant-type:device_code": "device_code",
    "urn:ietf:params:oauth:grant-type:jwt-bearer": "jwt_bearer",
    "urn:ietf:params:oauth:grant-type:token-exchange": "token_exchange",
    "client_credentials": "client_credentials",
}

TOKEN_GRANTS = Counter(
    "frontdoor_token_grants_total", "Token endpoint requests by grant type and outcome (issued or the OAuth error).",
    ["grant_type", "outcome"],
)
INTROSPECTIONS = Counter(
    "frontdoor_introspections_total", "Introspection requests by outcome (active, inactive, refused).", ["outcome"],
)
CONFIRMS = Counter(
    "frontdoor_confirms_total", "Operation confirms by outcome (the operation's state, or the refusal's code).",
    ["outcome"],
)
DELIVERIES = Counter(
    "frontdoor_webhook_deliveries_total", "Webhook delivery attempts by purpose, resulting state and error class.",
    ["purpose", "state", "error_class"],
)
DELIVERY_LAG = Gauge(
    "frontdoor_webhook_delivery_lag_seconds", "Age of the oldest due, undelivered webhook message (0 when none).",
    multiprocess_mode="max",
)
OUTBOX_DEPTH = Gauge(
    "frontdoor_outbox_depth", "Rows waiting in an outbox: unforwarded events, due webhook messages.", ["table"],
    multiprocess_mode="max",
)
DB_POOL_CONNECTIONS = Gauge(
    "frontdoor_db_pool_connections", "PostgreSQL pool connections of this process by state (open, idle, max).",
    ["service", "state"], multiprocess_mode="livesum",
)
REDIS_ERRORS = Counter(
    "frontdoor_redis_errors_total", "Redis commands that failed, by the operation that issued them.", ["operation"],
)


def grant_type_label(grant_type: str | None) -> str:
    """A bounded label for a ``grant_type`` parameter (``other`` for anything unknown)."""
    if grant_type is None:
        return "missing"
    return _GRANT_TYPES.get(grant_type, "other")


def sample_pool(pool: Any, service: str) -> None:
    """Record an asyncpg pool's open, idle and maximum connections."""
    DB_POOL_CONNECTIONS.labels(service, "open").set(pool.get_size())
    DB_POOL_CONNECTIONS.labels(service, "idle").set(pool.get_idle_size())
    DB_POOL_CONNECTIONS.labels(service, "max").set(pool.get_max_size())


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


@contextlib.asynccontextmanager
async def metrics_listener(
    port: int,
    *,
    samplers: Sequence[Callable[[], Awaitable[None]]] = (),
    interval: float = 15.0,
    host: str = "0.0.0.0",  # noqa: S104 - the internal port; the chart exposes it to the scraper only
) -> AsyncIterator[int | None]:
    """Serve ``/metrics`` on ``port`` and run ``samplers`` every ``interval`` seconds.

    ``port`` 0 serves and samples nothing. Yields the bound port, or None when off or when a
    sibling worker (multiprocess mode) holds the port.
    """
    if port <= 0:
        yield None
        return
    server: Any = None
    bound: int | None = None
    try:
        server, _thread = start_http_server(port, addr=host, registry=_registry())
        bound = int(server.server_port)
        _log.info("metrics_listening", port=bound)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        _log.info("metrics_port_held_by_sibling", port=port)  # multiprocess mode: another worker serves

    async def sample_forever() -> None:
        while True:
            for sample in samplers:
                try:
                    await sample()
                except Exception as exc:  # a sample failing (PostgreSQL away) must not stop the others
                    _log.warning("metrics_sample_failed", error=type(exc).__name__)
            await asyncio.sleep(interval)

    task = asyncio.create_task(sample_forever()) if samplers else None
    try:
        yield bound
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if server is not None:
            server.shutdown()
            server.server_close()
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            _multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
