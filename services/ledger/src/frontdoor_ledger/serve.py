"""Run the ledger under granian with ``FRONTDOOR_LEDGER_WORKERS`` workers.

    python -m frontdoor_ledger.serve --host 0.0.0.0 --port 8002

The container image's command, and how ``make run`` starts the ledger. The process becomes
granian (``exec``), so signals reach granian directly. ``FRONTDOOR_LEDGER_WORKERS`` 0 (the
default) means one worker per CPU this process may use: its CPU affinity, capped by a cgroup
CPU quota (a Kubernetes CPU limit, ``docker run --cpus``), since a container sees every CPU
of its node. The same rule as the issuer's launcher
(``frontdoor_issuer.serve``), from ``frontdoor_core.serving``.

Several workers are safe, as several ledger replicas are (``make run REPLICAS=2``,
tests/e2e/test_replicas.py): the confirm's compare-and-set and the perform message's lease
are in PostgreSQL, so a confirm raced over two workers performs once; a confirm waiting for
its outcome registers in its own worker and is woken by that worker's attempt, or by the
Redis channel every worker subscribes to (``frontdoor_operations.settled``) when another
worker, a deliverer or the company's report recorded it; a conversation's long polls and
streams are woken the same way (``frontdoor_conversations`` publishes every change); rate
limits and DPoP ``jti`` claims are Redis counters and ``SET NX``, endpoint rate limits are
counted in PostgreSQL (``PgThrottle``). Per-process state is only caches that a replica
has too (tenants and conversation settings 5 s, agent metadata within its bounds, verified
Session Token signatures) and each worker's own SIGTERM notice to its open streams.
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

APP = "frontdoor_ledger.asgi:app"


def worker_count(configured: int, *, cpus: Callable[[], int] | None = None) -> int:
    """``FRONTDOOR_LEDGER_WORKERS``, or one per available CPU (`available_cpus`) when it is 0."""
    return serving.worker_count(configured, cpus=cpus or available_cpus)


def granian_argv(host: str, port: int, workers: int, *, python: str = sys.executable) -> list[str]:
    """The granian command line for the ledger."""
    return serving.granian_argv(APP, host, port, workers, python=python)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--host``/``--port``, read the settings, then become granian."""
    p = argparse.ArgumentParser(prog="python -m frontdoor_ledger.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8002)
    args = p.parse_args(argv)
    settings = load()
    workers = worker_count(settings.ledger_workers)
    serving.become_granian(granian_argv(args.host, args.port, workers), workers=workers,
                           metrics_port=settings.metrics_port, name="ledger")


if __name__ == "__main__":
    main()
