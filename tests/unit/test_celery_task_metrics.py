"""The Celery worker's task metrics, read from its /metrics listener (frontdoor_dispatcher.task_metrics).

Tasks run eagerly in this process, so Celery's task_prerun/task_postrun signals fire here as in
a worker's child; the listener serves the same registry the worker's parent would (no
multiprocess directory in this process).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from celery import Celery
from frontdoor_dispatcher import task_metrics
from prometheus_client.parser import text_string_to_metric_families


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    task_metrics.connect(0)
    port = task_metrics.serve(_free_port(), host="127.0.0.1")
    assert port is not None
    yield f"http://127.0.0.1:{port}"
    server = task_metrics._state["server"]
    server.shutdown()
    server.server_close()
    task_metrics._state["server"] = None


def _samples(base_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(f"{base_url}/metrics")
    assert r.status_code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(r.text) for s in fam.samples}


def test_runs_counted_by_task_and_outcome_with_durations_and_last_success(base_url: str) -> None:
    app = Celery("metrics-test", set_as_current=False)
    app.conf.task_always_eager = True
    attempts = {"n": 0}

    @app.task(name="test.metrics.ok")
    def ok() -> str:
        return "done"

    @app.task(name="test.metrics.boom")
    def boom() -> None:
        raise RuntimeError("no")

    @app.task(name="test.metrics.flaky", bind=True, max_retries=2, default_retry_delay=0)
    def flaky(self) -> str:  # type: ignore[no-untyped-def]
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise self.retry(exc=RuntimeError("once"), countdown=0)
        return "second time"

    before = time.time()
    ok.apply()
    ok.apply()
    assert boom.apply().failed()
    flaky.apply()
    samples = _samples(base_url)

    def count(task: str, outcome: str) -> float:
        return samples.get(("frontdoor_celery_tasks_total", (("outcome", outcome), ("task", task))), 0.0)

    assert count("test.metrics.ok", "succeeded") == 2
    assert count("test.metrics.ok", "failed") == 0
    assert count("test.metrics.boom", "failed") == 1
    assert count("test.metrics.boom", "succeeded") == 0
    assert count("test.metrics.flaky", "retried") == 1
    assert count("test.metrics.flaky", "succeeded") == 1
    durations = {task: samples[("frontdoor_celery_task_duration_seconds_count", (("task", task),))]
                 for task in ("test.metrics.ok", "test.metrics.boom", "test.metrics.flaky")}
    assert durations == {"test.metrics.ok": 2, "test.metrics.boom": 1, "test.metrics.flaky": 2}
    last = samples[("frontdoor_celery_task_last_success_timestamp_seconds", (("task", "test.metrics.ok"),))]
    assert last >= before
    assert ("frontdoor_celery_task_last_success_timestamp_seconds", (("task", "test.metrics.boom"),)) not in samples


def test_multiprocess_mode_only_for_a_worker_that_serves() -> None:
    env: dict[str, str] = {}
    task_metrics.prepare(0, env, ["celery", "-A", "frontdoor_dispatcher.celery_app", "worker"])
    assert env == {}
    task_metrics.prepare(9100, env, ["celery", "-A", "frontdoor_dispatcher.celery_app", "beat"])
    assert env == {}
    task_metrics.prepare(9100, env, ["celery", "-A", "frontdoor_dispatcher.celery_app", "worker"])
    made = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    assert made.is_dir() and not any(made.iterdir())   # fresh and empty, as prometheus_client wants
    made.rmdir()
    chosen = {"PROMETHEUS_MULTIPROC_DIR": "/run/metrics"}
    task_metrics.prepare(9100, chosen, ["celery", "worker"])
    assert chosen == {"PROMETHEUS_MULTIPROC_DIR": "/run/metrics"}

