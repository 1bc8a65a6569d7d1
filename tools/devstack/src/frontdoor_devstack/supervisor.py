"""``make run``'s watch over its children, and the rolling restart of a replicated stack.

With one replica of each process a child that exits stops the whole stack, as before.
With ``FRONTDOOR_REPLICAS`` > 1 the supervisor acts like an orchestrator's controller: a
replica that exits (``kill -9`` one to try it) is started again while the load balancer
sends its traffic to the others, and ``SIGHUP`` restarts every process one at a time, each
HTTP replica drained at the load balancer first and put back once its ``/readyz`` answers.
The names, pids and ports of the running replicas are kept in ``{data_dir}/replicas.json``.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .load_balancer import LoadBalancer
from .processes import Replica, log_path

if TYPE_CHECKING:
    from .run import Stack

__all__ = ["rolling_restart", "supervise", "write_replicas"]


def write_replicas(data_dir: Path, stack: Stack, table: list[Replica]) -> None:
    pids = {name: proc.pid for name, proc in stack.children}
    state = {r.name: {"kind": r.kind, "pid": pids.get(r.name), "port": r.port} for r in table}
    tmp = data_dir / "replicas.json.tmp"
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(data_dir / "replicas.json")


def _ready(port: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.1)
    return False


def _restart(stack: Stack, replica: Replica, env: dict[str, str], logs: Path, lb: LoadBalancer) -> None:
    stack.stop_child(replica.name)
    proc = stack.spawn(replica.name, replica.argv, env, log_path(logs, replica))
    print(f"  {replica.name} stopped, started again (pid {proc.pid})", flush=True)


def rolling_restart(stack: Stack, table: list[Replica], env: dict[str, str], logs: Path, lb: LoadBalancer) -> None:
    """Restart every process, in waves: replica 1 of every kind (and the singletons), then replica 2, ...

    Within a kind one replica at a time is away; an HTTP replica is drained at the load
    balancer before it is stopped, and put back once its ``/readyz`` answers and the load
    balancer's own check agrees.
    """
    print("Rolling restart...", flush=True)
    for index in sorted({r.index for r in table}):
        wave = [r for r in table if r.index == index]
        http = [r for r in wave if r.port is not None]
        for replica in http:
            lb.set_state(replica.kind, replica.name, "drain")
        for replica in http:
            lb.wait_idle(replica.kind, replica.name)
        for replica in wave:
            _restart(stack, replica, env, logs, lb)
        for replica in http:
            assert replica.port is not None
            if not _ready(replica.port):
                print(f"  {replica.name} is not ready after its restart; see {log_path(logs, replica)}", flush=True)
            lb.set_state(replica.kind, replica.name, "ready")
            lb.wait_status(replica.kind, replica.name, "UP")
            print(f"  {replica.name} is back behind the load balancer", flush=True)
    print("Rolling restart done.", flush=True)


def supervise(stack: Stack, table: list[Replica], env: dict[str, str], logs: Path, *, lb: LoadBalancer | None,
              data_dir: Path) -> int:
    """Watch the children until one exits for good (answers 1) or Ctrl-C/SIGTERM (raised)."""
    by_name = {r.name: r for r in table}
    requested: list[bool] = []

    def on_hup(_signum: int, _frame: Any) -> None:
        requested.append(True)

    if lb is not None:
        signal.signal(signal.SIGHUP, on_hup)
    while True:
        if requested and lb is not None:
            requested.clear()
            rolling_restart(stack, table, env, logs, lb)
            write_replicas(data_dir, stack, table)
        for name, proc in list(stack.children):
            if proc.poll() is None:
                continue
            replica = by_name.get(name)
            if lb is not None and replica is not None:
                print(f"{name} exited with {proc.returncode}; starting it again", flush=True)
                stack.spawn(name, replica.argv, env, log_path(logs, replica))
                write_replicas(data_dir, stack, table)
                continue
            print(f"{name} exited with {proc.returncode}; see {logs}/{name}.log", file=sys.stderr)
            stack.stop()
            return 1
        time.sleep(0.2)

