"""Run the ledger under granian with ``FRONTDOOR_LEDGER_WORKERS`` workers.

    python -m frontdoor_ledger.serve --host 0.0.0.0 --port 8002

The container image's command, and how ``make run`` starts the ledger. The process becomes
granian (``exec``), so signals reach granian directly. ``FRONTDOOR_LEDGER_WORKERS`` 0 (the
default) means one worker per CPU this process may use: its CPU affinity, capped by a cgroup
CPU quota (a Kubernetes CPU limit, ``docker run --cpus``), since a container sees every CPU
of its node. The same rule as the issuer's launcher (``frontdoor_issuer.serve``); the CPU
count is repeated here because the ledger's image does not install the issuer.

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
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .settings import load

__all__ = ["available_cpus", "granian_argv", "main", "worker_count"]

_CGROUP = Path("/sys/fs/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _quota_cpus(read: Callable[[Path], str | None]) -> int | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` or v1 ``cfs_quota_us``, rounded up; None: no quota."""
    v2 = read(_CGROUP / "cpu.max")
    if v2 is not None:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max" and parts[0].isdigit() and parts[1].isdigit() and int(parts[1]):
            return max(math.ceil(int(parts[0]) / int(parts[1])), 1)
        return None
    quota, period = read(_CGROUP / "cpu" / "cpu.cfs_quota_us"), read(_CGROUP / "cpu" / "cpu.cfs_period_us")
    try:
        q, p = int((quota or "").strip()), int((period or "").strip())
    except ValueError:
        return None
    return max(math.ceil(q / p), 1) if q > 0 and p > 0 else None


def available_cpus(*, read: Callable[[Path], str | None] = _read, affinity: Callable[[], int] | None = None) -> int:
    """CPUs this process may use: its affinity, capped by the cgroup quota (at least 1)."""
    if affinity is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
    else:
        cpus = affinity()
    quota = _quota_cpus(read)
    return max(min(cpus, quota) if quota is not None else cpus, 1)


def worker_count(configured: int, *, cpus: Callable[[], int] | None = None) -> int:
    """``FRONTDOOR_LEDGER_WORKERS``, or one per available CPU (`available_cpus`) when it is 0."""
    return configured if configured > 0 else (cpus or available_cpus)()


def granian_argv(host: str, port: int, workers: int, *, python: str = sys.executable) -> list[str]:
    """The granian command line for the ledger."""
    argv = [python, "-m", "granian", "--interface", "asgi", "--host", host, "--port", str(port),
            "--workers", str(workers), "--no-ws"]
    if workers > 1:
        argv.append("--respawn-failed-workers")  # one worker dying must not leave the others alone
    return [*argv, "frontdoor_ledger.asgi:app"]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--host``/``--port``, read the settings, then become granian."""
    p = argparse.ArgumentParser(prog="python -m frontdoor_ledger.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8002)
    args = p.parse_args(argv)
    settings = load()
    workers = worker_count(settings.ledger_workers)
    if settings.metrics_port and workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="frontdoor-ledger-metrics-")
    command = granian_argv(args.host, args.port, workers)
    os.execv(command[0], command)  # noqa: S606 - our own interpreter, a fixed module


if __name__ == "__main__":
    main()
