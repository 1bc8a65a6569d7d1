"""The processes ``make run`` starts, as a table that ``FRONTDOOR_REPLICAS`` multiplies.

Each `Process` is one kind of Frontdoor process (the console, the issuer, the ledger, the
dispatcher's processes, beat). With ``FRONTDOOR_REPLICAS=N`` (``make run REPLICAS=N``)
every kind marked ``replicated`` runs N times, ``issuer-1`` .. ``issuer-N``, each HTTP
replica on a free loopback port behind the load balancer, which listens on the service's
own port. Beat stays one process: it only schedules, and two would schedule every job
twice (the jobs are idempotent and lock what they work on, but there is no point).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Process", "Replica", "expand", "free_port", "log_path", "replica_count"]

REPLICAS_ENV = "FRONTDOOR_REPLICAS"


@dataclass(frozen=True)
class Process:
    """One kind of process.

    Attributes:
        name: The kind (``issuer``); a replica is ``{name}-{i}``.
        argv: The command; ``{port}`` and ``{replica}`` in it become the replica's port and name.
        port: The public port for an HTTP service (the load balancer's when replicated), else None.
        replicated: Whether ``FRONTDOOR_REPLICAS`` multiplies it.
    """

    name: str
    argv: Sequence[str]
    port: int | None = None
    replicated: bool = True


@dataclass(frozen=True)
class Replica:
    """One process to run: its name (its log file's), the kind, its command, port and number (1..N)."""

    name: str
    kind: str
    argv: list[str]
    port: int | None
    index: int = 1


def replica_count(environ: dict[str, str] | os._Environ[str]) -> int:
    """``FRONTDOOR_REPLICAS`` (default 1); anything but a whole number from 1 to 8 is refused."""
    raw = environ.get(REPLICAS_ENV, "").strip() or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= 8:
        raise ValueError(f"{REPLICAS_ENV} must be a whole number from 1 to 8, not {raw!r}")
    return int(raw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def expand(table: Sequence[Process], replicas: int) -> list[Replica]:
    """The processes to start. One replica keeps today's names and ports (``issuer`` on its port)."""
    out = []
    for proc in table:
        count = replicas if proc.replicated and replicas > 1 else 1
        for i in range(1, count + 1):
            port = proc.port if count == 1 else (free_port() if proc.port is not None else None)
            name = proc.name if count == 1 else f"{proc.name}-{i}"
            argv = [a.replace("{port}", str(port)).replace("{replica}", name) for a in proc.argv]
            out.append(Replica(name, proc.name, argv, port, i))
    return out


def log_path(logs: Path, replica: Replica) -> Path:
    return logs / f"{replica.name}.log"
