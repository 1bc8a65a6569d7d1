"""``make run`` (``python -m frontdoor_devstack.run``) as a child process of a test module.

`start_devstack` starts it with a clean environment (no configured database, Redis, KEK or
public URL leaks in from the caller's shell; ``extra`` adds what the test wants, e.g. the
suite's own PostgreSQL and Redis, ports, ``FRONTDOOR_REPLICAS``) and waits, bounded, for
its banner. Its output is collected line by line in `Devstack.output`; `Devstack.wait_for`
waits for a line the supervisor prints later. `replicated` gives a module its own
``make run REPLICAS=2`` (the suite's embedded PostgreSQL and Redis, a data folder, free
ports), all of it gone when the block ends.
"""

from __future__ import annotations

import asyncio
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from frontdoor_tenancy.credentials.key_encryption import generate_kek_value

from tests.support.servers import Servers, start_servers

ROOT = Path(__file__).resolve().parents[2]
#: The services ``make run`` serves over HTTP (each behind HAProxy with ``FRONTDOOR_REPLICAS``).
SERVICES = ("console", "issuer", "ledger")
_INHERITED_OUT = ("DATABASE_URL", "REDIS_URL", "FRONTDOOR_KEK", "FRONTDOOR_ENV", "FRONTDOOR_REPLICAS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Devstack:
    proc: subprocess.Popen[str]
    data_dir: Path
    output: list[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def text(self) -> str:
        return "".join(self.output)

    def wait_for(self, text: str, timeout: float) -> None:
        """Wait until the output has a line containing ``text`` (fails with the output past ``timeout``)."""
        deadline = time.monotonic() + timeout
        while text not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"make run did not print {text!r}:\n{self.text()[-5000:]}")
            time.sleep(0.2)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (as Ctrl-C would) and wait; SIGKILL past ``timeout``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def _pump(stream: object, stack: Devstack) -> None:
    for line in stream:  # type: ignore[attr-defined]
        stack.output.append(line)
        stack.lines.put(line)


def start_devstack(data_dir: Path, extra: dict[str, str], *, timeout: float = 180.0) -> Devstack:
    """Start ``make run`` with ``FRONTDOOR_DATA_DIR=data_dir`` and ``extra``; wait for its banner."""
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_OUT and not k.endswith("_BASE_URL")}
    env.update({"FRONTDOOR_DATA_DIR": str(data_dir), **extra})
    proc = subprocess.Popen([sys.executable, "-m", "frontdoor_devstack.run"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stack = Devstack(proc, data_dir, [])
    threading.Thread(target=_pump, args=(proc.stdout, stack), daemon=True).start()
    try:
        stack.wait_for("Frontdoor is running.", timeout)
        deadline = time.monotonic() + 10
        while stack.text().count("=" * 72) < 2 and time.monotonic() < deadline:  # the banner's closing rule
            time.sleep(0.1)
    except AssertionError:
        proc.kill()
        proc.wait()
        raise
    return stack


@dataclass
class ReplicaStack:
    """A module's own ``make run REPLICAS=2``: its PostgreSQL and Redis, folder, ports and KEK, then the stack."""

    servers: Servers
    data_dir: Path
    ports: dict[str, int]  # the public ports (HAProxy's) of `SERVICES` and of the example company
    kek: str
    run: Devstack | None = None

    def start(self, extra: dict[str, str]) -> Devstack:
        """Start the stack on them, two replicas of each service, with ``extra`` besides."""
        self.run = start_devstack(self.data_dir, {
            **{f"FRONTDOOR_{name.upper()}_PORT": str(port) for name, port in self.ports.items()},
            "FRONTDOOR_REPLICAS": "2", "DATABASE_URL": self.servers.database_url,
            "REDIS_URL": self.servers.redis_url, "FRONTDOOR_KEK": self.kek, **extra})
        return self.run


@contextmanager
def replicated(name: str) -> Iterator[ReplicaStack]:
    """The ground for `ReplicaStack.start`; when the block ends the stack stops, then the servers, and the folder goes."""
    servers = asyncio.run(start_servers(f"{name}{secrets.token_hex(3)}"))
    data_dir = Path(tempfile.mkdtemp(prefix=f"fd{name}-"))
    os.chmod(data_dir, 0o711)  # the embedded PostgreSQL may run as 'nobody'
    ground = ReplicaStack(servers, data_dir, {service: free_port() for service in (*SERVICES, "example")},
                        generate_kek_value())
    try:
        yield ground
    finally:
        if ground.run is not None:
            ground.run.stop()
        servers.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
