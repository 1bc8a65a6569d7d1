"""The Celery worker's Prometheus metrics: its periodic jobs by name and outcome.

Counted from Celery's signals in the process that runs the task (``task_prerun`` starts the
clock, ``task_postrun`` reads the outcome from the task's final state), so every job is
covered without touching its code. Labels are the registered task names (a fixed set) and
three outcomes; no argument becomes a label.

- ``frontdoor_celery_tasks_total{task, outcome}``: outcome ``succeeded``, ``failed`` or
  ``retried``;
- ``frontdoor_celery_task_duration_seconds{task}``: run time of each attempt;
- ``frontdoor_celery_task_last_success_timestamp_seconds{task}``: when a job last finished
  well (alert on ``time() - ... > 3 * its schedule``);
- beat, which runs no task, serves ``frontdoor_celery_beat_sent_total{task}``: the jobs it
  has put on the queue (``before_task_publish`` in the beat process).

The worker runs Celery's prefork pool (``--concurrency N``; ``make run`` uses 1), so tasks
run in forked children while the listener must live in the parent: `prepare` switches on
prometheus_client's multiprocess mode (a fresh ``PROMETHEUS_MULTIPROC_DIR`` unless one is
set) before any metric exists, each child writes its samples there, and the parent serves
their sum on ``FRONTDOOR_METRICS_PORT`` from ``worker_init`` (beat, one process, from
``beat_init``). With ``--pool solo`` or
``threads`` the same code serves the one process's samples.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import MutableMapping
from typing import Any

__all__ = ["connect", "prepare", "serve"]

OUTCOMES = {"SUCCESS": "succeeded", "FAILURE": "failed", "RETRY": "retried"}
BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

_state: dict[str, Any] = {"connected": False, "server": None}
_started: dict[str, float] = {}


def prepare(metrics_port: int, environ: MutableMapping[str, str] = os.environ, argv: list[str] = sys.argv) -> None:
    """Before prometheus_client is imported: multiprocess mode when the worker serves metrics.

    Only in ``celery ... worker`` (not beat or ``inspect ping``, which import the app too).
    """
    if metrics_port > 0 and "worker" in argv and not environ.get("PROMETHEUS_MULTIPROC_DIR"):
        environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="frontdoor-celery-metrics-")


def connect(metrics_port: int) -> None:
    """Count every task run in this process (and its forks); serve from the worker's parent."""
    if _state["connected"]:
        return
    from celery.signals import (
        beat_init,
        before_task_publish,
        task_postrun,
        task_prerun,
        worker_init,
        worker_process_shutdown,
        worker_shutdown,
    )
    from prometheus_client import Counter, Gauge, Histogram

    tasks = Counter("frontdoor_celery_tasks", "Celery task runs by task and outcome", ["task", "outcome"])
    duration = Histogram("frontdoor_celery_task_duration_seconds", "Run time of a Celery task attempt",
                         ["task"], buckets=BUCKETS)
    last_success = Gauge("frontdoor_celery_task_last_success_timestamp_seconds",
                         "Unix time a Celery task last succeeded", ["task"], multiprocess_mode="max")
    sent = Counter("frontdoor_celery_beat_sent", "Periodic jobs beat has put on the queue", ["task"])

    @task_prerun.connect(weak=False)
    def _prerun(task_id: str = "", **_: Any) -> None:
        _started[task_id] = time.perf_counter()

    @task_postrun.connect(weak=False)
    def _postrun(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
        name = str(getattr(task, "name", "unknown"))
        began = _started.pop(task_id, None)
        if began is not None:
            duration.labels(name).observe(time.perf_counter() - began)
        outcome = OUTCOMES.get(state or "")
        if outcome is None:
            return  # REJECTED/IGNORED: not a run that finished
        tasks.labels(name, outcome).inc()
        if outcome == "succeeded":
            last_success.labels(name).set(time.time())

    @worker_init.connect(weak=False)
    def _serve(**_: Any) -> None:
        serve(metrics_port)

    @beat_init.connect(weak=False)
    def _serve_beat(**_: Any) -> None:
        _state["beat"] = True
        serve(metrics_port)

    @before_task_publish.connect(weak=False)
    def _sent(sender: Any = None, **_: Any) -> None:
        if _state.get("beat"):
            sent.labels(str(sender)).inc()

    @worker_shutdown.connect(weak=False)
    def _stop(**_: Any) -> None:
        server = _state["server"]
        if server is not None:
            server.shutdown()
            server.server_close()
            _state["server"] = None

    @worker_process_shutdown.connect(weak=False)
    def _child_gone(pid: int | None = None, **_: Any) -> None:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]

    _state["connected"] = True


def serve(port: int, host: str = "0.0.0.0") -> int | None:  # noqa: S104 - the internal port, scraper only (chart NetworkPolicy)
    """Serve ``/metrics`` on ``port`` (0: nothing); returns the bound port."""
    if port <= 0 or _state["server"] is not None:
        return None
    from prometheus_client import CollectorRegistry, multiprocess, start_http_server
    from prometheus_client.registry import REGISTRY

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    server, _thread = start_http_server(port, addr=host, registry=registry)
    _state["server"] = server
    return int(server.server_port)
