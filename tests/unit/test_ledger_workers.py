"""``FRONTDOOR_LEDGER_WORKERS`` and the ledger's launcher (issue #13 §4): 0 means one granian
worker per CPU the process may use, a cgroup CPU quota (a Kubernetes CPU limit) included, and the
default; ``make run`` starts the ledger through it (one worker per replica when replicated), and so does the image."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from frontdoor_core.settings import SettingsError, load_settings
from frontdoor_devstack.processes import expand
from frontdoor_devstack.run import process_table
from frontdoor_ledger import serve
from frontdoor_ledger.serve import granian_argv, worker_count


def test_the_setting_defaults_to_one_worker_per_cpu_and_refuses_a_negative_count() -> None:
    assert load_settings({}).ledger_workers == 0  # one per CPU
    assert load_settings({"FRONTDOOR_LEDGER_WORKERS": "1"}).ledger_workers == 1
    assert load_settings({"FRONTDOOR_LEDGER_WORKERS": "3"}).ledger_workers == 3
    with pytest.raises(SettingsError, match="FRONTDOOR_LEDGER_WORKERS"):
        load_settings({"FRONTDOOR_LEDGER_WORKERS": "-1"})
    with pytest.raises(SettingsError, match="FRONTDOOR_LEDGER_WORKERS"):
        load_settings({"FRONTDOOR_LEDGER_WORKERS": "two"})
    assert worker_count(0, cpus=lambda: 6) == 6
    assert worker_count(2, cpus=lambda: 6) == 2


def test_granian_command_line() -> None:
    argv = granian_argv("0.0.0.0", 8002, 2, python="/venv/bin/python")
    assert argv[:3] == ["/venv/bin/python", "-m", "granian"]
    assert argv[argv.index("--workers") + 1] == "2" and "--respawn-failed-workers" in argv
    assert argv[argv.index("--port") + 1] == "8002" and argv[-1] == "frontdoor_ledger.asgi:app"
    assert "--no-ws" in argv
    assert "--respawn-failed-workers" not in granian_argv("127.0.0.1", 8002, 1)


def _run_main(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], cpus: int = 4) -> tuple[list[str], dict[str, str]]:
    executed: list[Any] = []
    # serve.main sets PROMETHEUS_MULTIPROC_DIR itself: have monkeypatch record it, so that it
    # is removed again after the test (a leaked, deleted directory breaks later subprocesses).
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    for name in list(os.environ):
        if name.startswith("FRONTDOOR_") or name == "PROMETHEUS_MULTIPROC_DIR":
            monkeypatch.delenv(name)
    for name, value in {"FRONTDOOR_ENV": "test", **env}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(serve, "available_cpus", lambda: cpus)
    monkeypatch.setattr(os, "execv", lambda path, argv: executed.append((path, argv)))
    serve.main(["--host", "0.0.0.0", "--port", "8002"])
    (path, argv), = executed
    assert path == argv[0]
    return argv, dict(os.environ)


def test_main_execs_granian_with_the_configured_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    argv, env = _run_main(monkeypatch, {}, cpus=4)  # the default, 0: one per CPU
    assert argv[argv.index("--workers") + 1] == "4"
    assert "PROMETHEUS_MULTIPROC_DIR" not in env  # no metrics listener: nothing to sum
    argv, _ = _run_main(monkeypatch, {"FRONTDOOR_LEDGER_WORKERS": "1"}, cpus=4)
    assert argv[argv.index("--workers") + 1] == "1"


def test_several_workers_with_metrics_get_a_fresh_multiprocess_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    _, env = _run_main(monkeypatch, {"FRONTDOOR_LEDGER_WORKERS": "2", "FRONTDOOR_METRICS_PORT": "9102"})
    directory = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    assert directory.is_dir() and not any(directory.iterdir())
    directory.rmdir()
    _, env = _run_main(monkeypatch, {"FRONTDOOR_LEDGER_WORKERS": "1", "FRONTDOOR_METRICS_PORT": "9102"})
    assert "PROMETHEUS_MULTIPROC_DIR" not in env  # one worker: its own registry


def test_make_run_starts_the_ledger_through_its_launcher() -> None:
    settings = load_settings({})
    ledger, = [p for p in process_table(settings) if p.name == "ledger"]
    assert ledger.argv[1:3] == ["-m", "frontdoor_ledger.serve"]
    assert ledger.argv[ledger.argv.index("--port") + 1] == "{port}" and ledger.port == settings.ledger_port
    assert "--workers" not in ledger.argv  # FRONTDOOR_LEDGER_WORKERS decides, in the launcher
    replicas = [r for r in expand(process_table(settings), 2) if r.kind == "ledger"]
    assert len(replicas) == 2 and all(r.argv[1:3] == ["-m", "frontdoor_ledger.serve"] for r in replicas)
