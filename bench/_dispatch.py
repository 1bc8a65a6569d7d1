"""The delivery path's processes for benchmarks and end-to-end tests: the ledger under
granian, the deliverer, Celery workers (beat's periodic jobs); plus a tenant's webhook
endpoint and messages.

Every process runs in its own session (process group) with its log in the stack's folder,
and is stopped (SIGTERM to the group, SIGKILL after a grace) when the stack closes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._common import Stack, free_port, stop_process_group

BIN = Path(sys.executable).parent


def service_env(stack: Stack, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The issuer's environment (database, Redis, KEK, dev mode, loopback allowed) plus ``extra``."""
    return {**stack.issuer_env(), **(extra or {})}


class Service:
    """One child process (group) with its log file; restartable with the same arguments."""

    def __init__(self, stack: Stack, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        self.stack, self.name, self.argv, self.env = stack, name, list(argv), env
        self.log = stack.root / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        stack._stack.callback(self.stop)

    def start(self) -> Service:
        log = open(self.log, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        log.close()
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process_group(self.proc, timeout)
            self.proc = None

    def kill(self) -> None:
        """SIGKILL the whole group (a crash: nothing gets to clean up)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait_for_log(self, text: str, timeout: float = 30.0, *, since: int = 0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log.exists() and text in self.log.read_text(errors="replace")[since:]:
                return
            if not self.alive():
                break
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not log {text!r}:\n{self.log_tail()}")

    def log_size(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0


def deliverer(stack: Stack, env: dict[str, str], name: str = "deliverer") -> Service:
    """The deliverer (``python -m frontdoor_dispatcher.deliverer``): claims and sends due messages."""
    return Service(stack, name, [sys.executable, "-m", "frontdoor_dispatcher.deliverer"], env)


def worker(stack: Stack, env: dict[str, str], *, concurrency: int = 2, name: str = "worker",
           extra_args: Sequence[str] = ()) -> Service:
    return Service(stack, name, [str(BIN / "celery"), "-A", "frontdoor_dispatcher.celery_app", "worker",
                                 "--concurrency", str(concurrency), "--loglevel", "INFO", "--without-gossip",
                                 "--without-mingle", "--without-heartbeat",
                                 "-n", f"{name}-{secrets.token_hex(3)}@%h", *extra_args], env)


def start_worker(w: Service, timeout: float = 60.0) -> Service:
    """Start a Celery worker and wait until it consumes (its log says ``ready``)."""
    since = w.log_size()
    w.start()
    w.wait_for_log("ready", timeout, since=since)
    return w


def granian_app(stack: Stack, name: str, app: str, env: dict[str, str], port: int | None = None) -> Service:
    port = port or free_port()
    svc = Service(stack, name, [str(BIN / "granian"), "--interface", "asgi", "--host", "127.0.0.1", "--port",
                                str(port), "--workers", "1", "--no-ws", app], env)
    svc.base_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return svc


def start_http(svc: Service, timeout: float = 30.0) -> Service:
    """Start a granian service and wait until ``/healthz`` answers 200."""
    svc.start()
    return wait_http(svc, timeout)


def wait_http(svc: Service, timeout: float = 30.0) -> Service:
    """Wait until a started granian service's ``/healthz`` answers 200."""
    base = svc.base_url  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1) as r:
                if r.status == 200:
                    return svc
        except OSError:
            if not svc.alive():
                break
            time.sleep(0.1)
    raise RuntimeError(f"{svc.name} did not start:\n{svc.log_tail()}")


# --------------------------------------------------------------------------- data

async def add_endpoint(stack: Stack, url: str, *, tenant_id: str | None = None,
                       event_types: Sequence[str] = ("operation.succeeded",)) -> tuple[str, str]:
    """A webhook endpoint for the tenant; answers ``(endpoint_id, whsec_ secret)``."""
    from frontdoor_core.db import create_pool
    from frontdoor_tenancy.actor import Actor
    from frontdoor_tenancy.credentials.key_encryption import Kek
    from frontdoor_webhooks.endpoints import create_endpoint

    assert stack.tenant is not None or tenant_id is not None
    actor = Actor(tenant_id=tenant_id or stack.tenant.id, type="system")  # type: ignore[union-attr]
    pool = await create_pool(stack.database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            created = await create_endpoint(conn, actor, url=url, event_types=list(event_types),
                                            kek=Kek.from_env_value(stack.kek_value), now=datetime.now(UTC),
                                            allow_insecure=True)
    finally:
        await pool.close()
    return created.endpoint.id, created.secret


async def enqueue(pool: Any, tenant_id: str, endpoint_id: str, count: int, *, start: int = 0,
                  event_type: str = "operation.succeeded") -> list[str]:
    """``count`` event messages for one endpoint, in one transaction (one NOTIFY each, as in production)."""
    from frontdoor_webhooks.messages import enqueue_message

    now = datetime.now(UTC)
    async with pool.acquire() as conn, conn.transaction():
        return [await enqueue_message(conn, tenant_id, endpoint_id, event_type, {"seq": start + i}, purpose="event",
                                      now=now) for i in range(count)]


async def message_states(pool: Any, ids: Sequence[str] | None = None) -> dict[str, int]:
    """How many messages are in each state (all, or those of ``ids``)."""
    rows = await pool.fetch("SELECT state, count(*) AS n FROM webhook_messages"
                            " WHERE $1::text[] IS NULL OR id = ANY($1) GROUP BY state",
                            None if ids is None else list(ids))
    return {r["state"]: r["n"] for r in rows}
