"""Becoming granian with N workers: what the issuer's and the ledger's launchers share.

``python -m frontdoor_issuer.serve`` and ``python -m frontdoor_ledger.serve`` read their
worker setting (0: one per CPU this process may use) and exec granian, so signals reach
granian directly. The CPU count is the process's CPU affinity capped by a cgroup CPU quota
(a Kubernetes CPU limit, ``docker run --cpus``), since a container sees every CPU of its
node. With metrics on and several workers, ``PROMETHEUS_MULTIPROC_DIR`` is set to a fresh
empty directory when unset, so ``/metrics`` sums every worker.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["WORKERS_KILL_TIMEOUT_S", "available_cpus", "become_granian", "granian_argv", "worker_count"]

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


WORKERS_KILL_TIMEOUT_S = 25
"""Seconds granian waits for a worker to stop after SIGTERM before killing it (several workers)."""


def worker_count(configured: int, *, cpus: Callable[[], int] | None = None) -> int:
    """The configured workers, or one per available CPU (`available_cpus`) when it is 0."""
    return configured if configured > 0 else (cpus or available_cpus)()


def granian_argv(app: str, host: str, port: int, workers: int, *, python: str = sys.executable) -> list[str]:
    """granian's command line for the ASGI ``app`` (``module:attribute``)."""
    argv = [python, "-m", "granian", "--interface", "asgi", "--host", host, "--port", str(port),
            "--workers", str(workers), "--no-ws"]
    if workers > 1:
        argv.append("--respawn-failed-workers")  # one worker dying must not leave the others alone
        # A worker still starting when SIGTERM comes loses it (it runs granian's inherited handler
        # until its own loop's is set) and would never stop; granian waits for every worker. Past
        # this, a worker that has not stopped is killed: longer than a graceful stop takes (an
        # attempt in flight, FRONTDOOR_WEBHOOK_TIMEOUT 15 s), shorter than the chart's 60 s grace.
        argv += ["--workers-kill-timeout", str(WORKERS_KILL_TIMEOUT_S)]
    return [*argv, app]


def become_granian(command: list[str], *, workers: int, metrics_port: int, name: str) -> None:
    """Exec ``command`` (from `granian_argv`), with a multiprocess metrics directory when needed."""
    if metrics_port and workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=f"frontdoor-{name}-metrics-")
    os.execv(command[0], command)  # noqa: S606 - our own interpreter, a fixed module
