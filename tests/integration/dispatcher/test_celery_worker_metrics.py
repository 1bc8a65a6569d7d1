"""A real Celery worker (prefork, two children) and beat serve their metrics on FRONTDOOR_METRICS_PORT.

The runs happen in the forked children; the parent's listener must show their sum
(prometheus_client multiprocess mode, frontdoor_dispatcher.task_metrics). The worker listens
on a queue of its own so it never takes another test's task.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from celery import Celery
from frontdoor_core.settings import Settings
from prometheus_client.parser import text_string_to_metric_families

from tests.support.eventually import eventually

TASK = "frontdoor.operations.expire_due"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(args: list[str], settings: Settings, kek_value: str, tmp_path: Path,
            port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FRONTDOOR_ENV": "test", "DATABASE_URL": settings.database_url,
           "REDIS_URL": settings.redis_url, "FRONTDOOR_KEK": kek_value, "FRONTDOOR_DATA_DIR": str(tmp_path),
           "FRONTDOOR_METRICS_PORT": str(port)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    celery = str(Path(sys.executable).with_name("celery"))
    return subprocess.Popen([celery, "-A", "frontdoor_dispatcher.celery_app", *args], env=env,
                            stdout=(tmp_path / f"{args[0]}-{port}.log").open("wb"), stderr=subprocess.STDOUT)


def _serving(base: str) -> bool:
    """True when ``base`` answers with Prometheus text."""
    try:
        r = httpx.get(f"{base}/metrics", timeout=2.0)
        list(text_string_to_metric_families(r.text))
    except (httpx.TransportError, ValueError):
        return False
    return r.status_code == 200


def _start(args: list[str], settings: Settings, kek_value: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``celery <args>`` and answer once its metrics listener answers.

    The port is picked free, but another xdist worker's server may take it before Celery
    binds it: Celery's listener then fails (``Address already in use`` in its log) and that
    server answers. The listener binds before the worker says it is ready (beat: before it
    starts), so a ready process without that error is the one answering; otherwise it is
    started again on another port.
    """
    ready = b"ready." if args[0] == "worker" else b"beat: Starting"
    for _ in range(3):
        port = _free_port()
        proc, base = _launch(args, settings, kek_value, tmp_path, port), f"http://127.0.0.1:{port}"
        log = tmp_path / f"{args[0]}-{port}.log"
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                text = log.read_bytes()
                if b"Address already in use" in text:
                    break
                if ready in text and _serving(base):
                    return proc, base
                time.sleep(0.2)
        except BaseException:  # a timeout or Ctrl-C while waiting: never leave the process behind
            _stop(proc)
            raise
        _stop(proc)
    raise AssertionError("celery never served its metrics on a port of its own")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def worker(settings: Settings, migrated: str, kek_value: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    queue = f"metrics-test-{secrets.token_hex(4)}"
    proc, base = _start(["worker", "--pool", "prefork", "--concurrency", "2", "-Q", queue, "-n", f"{queue}@%h",
                         "--without-mingle", "--without-gossip"], settings, kek_value, tmp_path)
    try:
        yield queue, base
    finally:
        _stop(proc)


async def _samples(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    try:
        async with httpx.AsyncClient() as c:
            r = await c.get(f"{base}/metrics")
    except httpx.TransportError as exc:
        raise AssertionError("not listening yet") from exc
    assert r.status_code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(r.text) for s in fam.samples}


async def test_beat_counts_the_jobs_it_sends(settings: Settings, migrated: str, kek_value: str,
                                             tmp_path: Path) -> None:
    proc, base = _start(["beat"], settings, kek_value, tmp_path)
    try:
        async def sent() -> float:
            samples = await _samples(base)
            n = samples.get(("frontdoor_celery_beat_sent_total", (("task", "frontdoor.webhooks.recoveries"),)), 0.0)
            assert n >= 1, n   # scheduled every 5 s
            return n

        await eventually(sent, timeout=60)
    finally:
        _stop(proc)


async def test_prefork_children_runs_are_served_by_the_parent(settings: Settings, worker: tuple[str, str]) -> None:
    queue, base = worker  # listening (`_start`)
    client = Celery("metrics-test-client", broker=settings.redis_url.replace("unix://", "redis+socket://"),
                    set_as_current=False)
    sent_at = time.time()
    for _ in range(3):
        client.send_task(TASK, queue=queue)

    async def counted() -> dict[str, float]:
        async with httpx.AsyncClient() as c:
            text = (await c.get(f"{base}/metrics")).text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for fam in text_string_to_metric_families(text) for s in fam.samples}
        runs = samples.get(("frontdoor_celery_tasks_total", (("outcome", "succeeded"), ("task", TASK))), 0.0)
        assert runs == 3, runs
        return {
            "durations": samples[("frontdoor_celery_task_duration_seconds_count", (("task", TASK),))],
            "last": samples[("frontdoor_celery_task_last_success_timestamp_seconds", (("task", TASK),))],
        }

    seen = await eventually(counted, timeout=60)
    assert seen["durations"] == 3
    assert seen["last"] >= sent_at
