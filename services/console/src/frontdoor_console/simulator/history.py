"""The simulator's run history: each run kept per tenant (``simulator_runs``), without secrets.

A run is stored as what the page may show of it and no more: each step's name, outcome,
summary, findings (codes, fixes, links) and its exchanges reduced to method, URL, status,
time and fetch error. Headers and bodies are not kept, so no token, assertion, DPoP proof
or key can be in a stored row (the live page shows those decoded and redacted, once).
A tenant keeps its latest `KEPT` runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

from .step import Step, StepFinding

__all__ = ["KEPT", "LISTED", "RunRecord", "StoredExchange", "StoredStep", "get_run", "latest_runs", "record_run",
           "status_of"]

KEPT: Final = 100
"""Runs kept per tenant; older ones are deleted when a run is recorded."""
LISTED: Final = 20
"""Runs the simulator page lists."""

Status = Literal["passed", "failed", "informational", "not_run"]


def status_of(step: Step) -> Status:
    """A step's outcome as the page names it."""
    if step.ok:
        return "passed"
    if step.ok is False:
        return "failed"
    return "informational" if step.exchanges or step.findings else "not_run"


class StoredExchange(msgspec.Struct, frozen=True, kw_only=True):
    """One request of a stored step: no headers, no body."""

    method: str
    url: str
    status: int | None = None
    elapsed_ms: float = 0.0
    error: str = ""


class StoredStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a stored run; ``duration_ms`` is the time its requests took."""

    key: str
    title: str
    status: Status
    summary: str = ""
    duration_ms: float = 0.0
    findings: list[StepFinding] = msgspec.field(default_factory=list)
    exchanges: list[StoredExchange] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, step: Step) -> StoredStep:
        exchanges = [StoredExchange(method=x.method, url=x.url, status=x.status, elapsed_ms=round(x.elapsed_ms, 1),
                                    error=x.error) for x in step.exchanges]
        return cls(key=step.key, title=step.title, status=status_of(step), summary=step.summary,
                   duration_ms=round(step.duration_ms, 1), findings=list(step.findings),
                   exchanges=exchanges)


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A stored run; ``steps`` is empty in `latest_runs` (the list shows no steps)."""

    id: str
    started_at: datetime
    finished_at: datetime
    member_email: str
    ok: bool
    steps: list[StoredStep] = msgspec.field(default_factory=list)
    failed_codes: list[str] = msgspec.field(default_factory=list)


def _steps(raw: object) -> list[StoredStep]:
    return msgspec.convert(raw, type=list[StoredStep])


async def record_run(conn: asyncpg.Connection, tenant_id: str, steps: list[Step], *, member_id: str,
                     member_email: str, started_at: datetime, finished_at: datetime, run_id: str | None = None) -> str:
    """Store a finished run (and drop the tenant's runs past the latest `KEPT`); its ID.

    ``run_id``: the ID a run waiting for its sign-in was given when it started.
    """
    run_id = run_id or new_id("sim")
    stored = [StoredStep.of(s) for s in steps]
    ok = all(s.status != "failed" for s in stored)
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO simulator_runs (tenant_id, id, started_at, finished_at, member_id, member_email, ok, steps)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", tenant_id, run_id, started_at, finished_at, member_id,
            member_email, ok, msgspec.to_builtins(stored))
        await conn.execute(
            "DELETE FROM simulator_runs WHERE tenant_id = $1 AND id IN (SELECT id FROM simulator_runs"
            " WHERE tenant_id = $1 ORDER BY started_at DESC, id DESC OFFSET $2)", tenant_id, KEPT)
    return run_id


async def latest_runs(conn: asyncpg.Connection, tenant_id: str, *, limit: int = LISTED) -> list[RunRecord]:
    """The tenant's latest runs, newest first, each with the codes of its failed steps."""
    rows = await conn.fetch(
        "SELECT id, started_at, finished_at, member_email, ok, steps FROM simulator_runs"
        " WHERE tenant_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2", tenant_id, limit)
    out = []
    for r in rows:
        codes = [f.code for s in _steps(r["steps"]) if s.status == "failed" for f in s.findings]
        out.append(RunRecord(id=r["id"], started_at=r["started_at"], finished_at=r["finished_at"],
                             member_email=r["member_email"], ok=r["ok"], failed_codes=codes))
    return out


async def get_run(conn: asyncpg.Connection, tenant_id: str, run_id: str) -> RunRecord | None:
    """One of the tenant's runs with its steps, or None (another tenant's run is None too)."""
    r = await conn.fetchrow(
        "SELECT id, started_at, finished_at, member_email, ok, steps FROM simulator_runs"
        " WHERE tenant_id = $1 AND id = $2", tenant_id, run_id)
    if r is None:
        return None
    return RunRecord(id=r["id"], started_at=r["started_at"], finished_at=r["finished_at"],
                     member_email=r["member_email"], ok=r["ok"], steps=_steps(r["steps"]))
