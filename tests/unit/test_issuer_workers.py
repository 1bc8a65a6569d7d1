"""``FRONTDOOR_ISSUER_WORKERS`` and the issuer's launcher (issue #13 §2): 0 means one granian
worker per CPU the process may use, a cgroup CPU quota (a Kubernetes CPU limit) included."""

from __future__ import annotations

from pathlib import Path

import pytest
from frontdoor_core.settings import SettingsError, load_settings
from frontdoor_issuer.serve import available_cpus, granian_argv, worker_count


def files(**content: str) -> object:
    def read(path: Path) -> str | None:
        return content.get(path.name.replace(".", "_"))
    return read


@pytest.mark.parametrize(("content", "affinity", "expected"), [
    ({}, 8, 8),  # no cgroup files: the affinity
    ({"cpu_max": "max 100000\n"}, 8, 8),  # v2 without a quota
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
    assert load_settings({}).issuer_workers == 0
    assert load_settings({"FRONTDOOR_ISSUER_WORKERS": "4"}).issuer_workers == 4
    with pytest.raises(SettingsError, match="FRONTDOOR_ISSUER_WORKERS"):
        load_settings({"FRONTDOOR_ISSUER_WORKERS": "-1"})


def test_granian_command_line() -> None:
    argv = granian_argv("0.0.0.0", 8001, 2)
    assert argv[1:3] == ["-m", "granian"]
    assert argv[argv.index("--workers") + 1] == "2" and "--respawn-failed-workers" in argv
    assert argv[argv.index("--port") + 1] == "8001" and argv[-1] == "frontdoor_issuer.asgi:app"
    assert "--respawn-failed-workers" not in granian_argv("127.0.0.1", 8001, 1)
