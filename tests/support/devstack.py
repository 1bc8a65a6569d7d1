"""``make run`` (``python -m frontdoor_devstack.run``) as a child process of a test module.

`start_devstack` starts it with a clean environment (no configured database, Redis, KEK or
public URL leaks in from the caller's shell; ``extra`` adds what the test wants, e.g. the
suite's own PostgreSQL and Redis, ports, ``FRONTDOOR_REPLICAS``) and waits, bounded, for
its banner. Its output is collected line by line in `Devstack.output`; `Devstack.wait_for`
waits for a line the supervisor prints later.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
