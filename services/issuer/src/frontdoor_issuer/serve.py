"""Run the issuer under granian with ``FRONTDOOR_ISSUER_WORKERS`` workers.

    python -m frontdoor_issuer.serve --host 0.0.0.0 --port 8001

The container image's command, and how ``make run`` starts the issuer. The process
becomes granian (``exec``), so signals reach granian directly. ``FRONTDOOR_ISSUER_WORKERS``
0 (the default) means one worker per CPU this process may use: its CPU affinity, capped by
a cgroup CPU quota (a Kubernetes CPU limit, ``docker run --cpus``), since a container sees
every CPU of its node.

Several workers are safe: replay claims, rate limits, device and authorization codes are
in Redis, Sessions in PostgreSQL, DPoP nonces are stateless; the per-process caches
(tenants 5 s, signing keys 30 s, agent metadata within its bounds) are only duplicated.
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


def worker_count(configured: int, *, cpus: Callable[[], int] = available_cpus) -> int:
    """``FRONTDOOR_ISSUER_WORKERS``, or one per available CPU when it is 0."""
    return configured if configured > 0 else cpus()


def granian_argv(host: str, port: int, workers: int) -> list[str]:
    """The granian command line for the issuer."""
    argv = [sys.executable, "-m", "granian", "--interface", "asgi", "--host", host, "--port", str(port),
            "--workers", str(workers), "--no-ws"]
    if workers > 1:
        argv.append("--respawn-failed-workers")  # one worker dying must not leave the others alone
    return [*argv, "frontdoor_issuer.asgi:app"]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--host``/``--port``, read the settings, then become granian."""
    p = argparse.ArgumentParser(prog="python -m frontdoor_issuer.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001)
    args = p.parse_args(argv)
    settings = load()
    workers = worker_count(settings.issuer_workers)
    if settings.metrics_port and workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="frontdoor-issuer-metrics-")
    command = granian_argv(args.host, args.port, workers)
    os.execv(command[0], command)  # noqa: S606 - our own interpreter, a fixed module


if __name__ == "__main__":
    main()
