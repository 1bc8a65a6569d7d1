"""``frontdoor_core.serving``: the CPUs a launcher counts (the affinity capped by a cgroup CPU quota,
a Kubernetes CPU limit), granian's command line, and the multiprocess metrics directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from frontdoor_core.serving import (
    WORKERS_KILL_TIMEOUT_S,
    available_cpus,
    become_granian,
    granian_argv,
    worker_count,
)


def files(**content: str) -> object:
    def read(path: Path) -> str | None:
        return content.get(path.name.replace(".", "_"))
    return read


@pytest.mark.parametrize(("content", "affinity", "expected"), [
    ({}, 8, 8),  # no cgroup files: the affinity
    ({"cpu_max": "max 100000\n"}, 8, 8),  # v2 without a quota
    ({"cpu_max": "100000 100000\n"}, 8, 1),  # the chart's 1-CPU limit on an 8-CPU node
    ({"cpu_max": "200000 100000\n"}, 8, 2),  # v2: a 2-CPU limit on an 8-CPU node
    ({"cpu_max": "150000 100000\n"}, 8, 2),  # 1.5 CPUs rounds up
    ({"cpu_max": "50000 100000\n"}, 8, 1),  # half a CPU: still one worker
    ({"cpu_max": "400000 100000\n"}, 2, 2),  # a quota above the affinity: the affinity
    ({"cpu_cfs_quota_us": "300000\n", "cpu_cfs_period_us": "100000\n"}, 16, 3),  # v1
    ({"cpu_cfs_quota_us": "-1\n", "cpu_cfs_period_us": "100000\n"}, 4, 4),  # v1 without a quota
    ({"cpu_max": "garbage"}, 4, 4),
])
def test_available_cpus_caps_the_affinity_by_the_quota(content: dict[str, str], affinity: int,
                                                       expected: int) -> None:
    assert available_cpus(read=files(**content), affinity=lambda: affinity) == expected  # type: ignore[arg-type]


def test_worker_count_is_the_setting_or_one_per_cpu() -> None:
    assert worker_count(0, cpus=lambda: 6) == 6
    assert worker_count(3, cpus=lambda: 6) == 3


def test_granian_command_line() -> None:
    argv = granian_argv("pkg.asgi:app", "0.0.0.0", 8001, 2, python="/venv/bin/python")
    assert argv[:3] == ["/venv/bin/python", "-m", "granian"]
    assert argv[argv.index("--workers") + 1] == "2" and "--respawn-failed-workers" in argv
    assert argv[argv.index("--port") + 1] == "8001" and argv[-1] == "pkg.asgi:app"
    assert "--no-ws" in argv
    assert "--respawn-failed-workers" not in granian_argv("pkg.asgi:app", "127.0.0.1", 8001, 1)
    assert argv[argv.index("--workers-kill-timeout") + 1] == str(WORKERS_KILL_TIMEOUT_S)
    assert "--workers-kill-timeout" not in granian_argv("pkg.asgi:app", "127.0.0.1", 8001, 1)


@pytest.mark.parametrize(("workers", "metrics_port", "made"), [(2, 9100, True), (1, 9100, False), (2, 0, False)])
def test_become_granian_makes_a_metrics_directory_only_for_several_workers_with_metrics(
        monkeypatch: pytest.MonkeyPatch, workers: int, metrics_port: int, made: bool) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # recorded, so removed again after the test
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    executed: list[Any] = []
    monkeypatch.setattr(os, "execv", lambda path, argv: executed.append((path, argv)))
    become_granian(["/venv/bin/python", "-m", "granian", "x:app"], workers=workers, metrics_port=metrics_port,
                   name="svc")
    assert executed == [("/venv/bin/python", ["/venv/bin/python", "-m", "granian", "x:app"])]
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    assert (directory is not None) == made
    if directory:
        path = Path(directory)
        assert path.is_dir() and path.name.startswith("frontdoor-svc-metrics-") and not any(path.iterdir())
        path.rmdir()


def test_become_granian_keeps_a_configured_metrics_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setattr(os, "execv", lambda path, argv: None)
    become_granian(["/py", "-m", "granian", "x:app"], workers=4, metrics_port=9100, name="svc")
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path)
