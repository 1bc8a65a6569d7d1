"""``FRONTDOOR_ISSUER_WORKERS`` and the issuer's launcher (issue #13 §2): 0 means one granian
worker per CPU the process may use, a cgroup CPU quota (a Kubernetes CPU limit) included."""

from __future__ import annotations

import pytest
from frontdoor_core.settings import SettingsError, load_settings
from frontdoor_issuer.serve import granian_argv, worker_count


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
