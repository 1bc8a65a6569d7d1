"""Several ledger workers with ``FRONTDOOR_METRICS_PORT`` (issue #13 §4): the launcher
(``python -m frontdoor_ledger.serve``) gives them one prometheus multiprocess directory, so the
one ``/metrics`` listener (the first worker to bind it) reports every worker's samples, not
only its own: with two workers the pools' ``max`` connections are summed (``livesum``), twice
``FRONTDOOR_DB_POOL_MAX``."""

from __future__ import annotations

import httpx
import pytest

from tests.support.devstack import free_port
from tests.support.dns_server import LocalDNS
from tests.support.eventually import eventually
from tests.support.granian_app import GranianApp, service_env
from tests.support.servers import Servers

POOL_MAX = 3


def _pool_max(text: str) -> float | None:
    for line in text.splitlines():
        if line.startswith("frontdoor_db_pool_connections{") and 'service="ledger"' in line and 'state="max"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.parametrize("workers", [1, 2])
async def test_metrics_sum_every_worker(servers: Servers, dns: LocalDNS, kek_value: str, workers: int) -> None:
    port = free_port()
    env = service_env(servers, dns, kek_value, FRONTDOOR_LEDGER_WORKERS=str(workers),
                      FRONTDOOR_METRICS_PORT=str(port), FRONTDOOR_DB_POOL_MAX=str(POOL_MAX))
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # the launcher makes one
    app = GranianApp("frontdoor_ledger.asgi:app", env, launcher="frontdoor_ledger.serve")
    try:
        await app.ready(workers=workers)

        async def summed() -> None:
            async with httpx.AsyncClient(timeout=5) as http:
                try:
                    r = await http.get(f"http://127.0.0.1:{port}/metrics")
                except httpx.HTTPError as exc:
                    raise AssertionError(str(exc)) from None
            assert r.status_code == 200
            assert _pool_max(r.text) == POOL_MAX * workers, (_pool_max(r.text), app.output())

        await eventually(summed, timeout=30, interval=0.3)  # each worker samples its pool as it starts
    finally:
        app.close()
