"""Run the issuer under granian with ``FRONTDOOR_ISSUER_WORKERS`` workers.

    python -m frontdoor_issuer.serve --host 0.0.0.0 --port 8001

The container image's command, and how ``make run`` starts the issuer. The process
becomes granian (``exec``), so signals reach granian directly. ``FRONTDOOR_ISSUER_WORKERS``
0 (the default) means one worker per CPU this process may use: its CPU affinity, capped by
a cgroup CPU quota (a Kubernetes CPU limit, ``docker run --cpus``), since a container sees
every CPU of its node (``frontdoor_core.serving``, shared with the ledger's launcher).

Several workers are safe: replay claims, rate limits, device and authorization codes are
in Redis, Sessions in PostgreSQL, DPoP nonces are stateless; the per-process caches
(tenants 5 s, signing keys 30 s, agent metadata within its bounds) are only duplicated.
With ``FRONTDOOR_METRICS_PORT`` set and several workers, ``PROMETHEUS_MULTIPROC_DIR`` is
set to a fresh empty directory when unset, so ``/metrics`` sums every worker.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from frontdoor_core import serving
from frontdoor_core.serving import available_cpus

from .settings import load

__all__ = ["available_cpus", "granian_argv", "main", "worker_count"]

APP = "frontdoor_issuer.asgi:app"


def worker_count(configured: int, *, cpus: Callable[[], int] | None = None) -> int:
    """``FRONTDOOR_ISSUER_WORKERS``, or one per available CPU (`available_cpus`) when it is 0."""
    return serving.worker_count(configured, cpus=cpus or available_cpus)


def granian_argv(host: str, port: int, workers: int, *, python: str = sys.executable) -> list[str]:
    """The granian command line for the issuer."""
    return serving.granian_argv(APP, host, port, workers, python=python)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--host``/``--port``, read the settings, then become granian."""
    p = argparse.ArgumentParser(prog="python -m frontdoor_issuer.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001)
    args = p.parse_args(argv)
    settings = load()
    workers = worker_count(settings.issuer_workers)
    serving.become_granian(granian_argv(args.host, args.port, workers), workers=workers,
                           metrics_port=settings.metrics_port, name="issuer")


if __name__ == "__main__":
    main()
