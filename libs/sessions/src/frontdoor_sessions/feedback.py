"""Agents' feedback reports (PAP §8): a task the company offers no way to do.

Reports are data for the company's admins: stored as received (bounded), never
interpreted, never executed (PAP-8-07). Unknown kinds are accepted (PAP-8-06).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from frontdoor_core.ids import new_id
from frontdoor_protocol.errors import ProtocolError

__all__ = ["MAX_DESCRIPTION", "MAX_TASK", "FeedbackReport", "StoredReport", "list_feedback", "parse_report", "record_feedback"]

MAX_TASK = 200
MAX_DESCRIPTION = 2000
MAX_KIND = 64


class FeedbackReport(msgspec.Struct, frozen=True, kw_only=True):
    """A validated report."""

    kind: str
    task: str
    description: str


def parse_report(body: object) -> FeedbackReport:
    """Validate a decoded JSON body; ``invalid_request`` for anything out of bounds."""
    if not isinstance(body, dict):
        raise ProtocolError("invalid_request", "The report must be a JSON object.")
    kind, task, description = body.get("kind"), body.get("task"), body.get("description")
    for value, limit in ((kind, MAX_KIND), (task, MAX_TASK), (description, MAX_DESCRIPTION)):
        if not isinstance(value, str) or not value.strip() or len(value) > limit or "\x00" in value:
            raise ProtocolError("invalid_request", "kind, task (at most 200) and description (at most 2000) are required.")
    assert isinstance(kind, str) and isinstance(task, str) and isinstance(description, str)
    return FeedbackReport(kind=kind, task=task, description=description)


async def record_feedback(conn: asyncpg.Connection, tenant_id: str, *, session_id: str, client_id: str, user_id: str,
                          report: FeedbackReport, now: datetime) -> str:
    """Store a report; return its ID."""
    report_id = new_id("evt")
    body: dict[str, Any] = {"task": report.task, "description": report.description}
    await conn.execute(
        "INSERT INTO feedback (tenant_id, id, session_id, client_id, user_id, kind, body, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        tenant_id, report_id, session_id, client_id, user_id, report.kind, body, now,
    )
    return report_id


class StoredReport(msgspec.Struct, frozen=True, kw_only=True):
    """A report as the tenant's admins read it (text shown as data, never interpreted)."""

    id: str
    created_at: datetime
    client_id: str
    kind: str
    task: str
    description: str


async def list_feedback(conn: asyncpg.Connection, tenant_id: str, *, limit: int = 50,
                        before: str | None = None) -> list[StoredReport]:
    """Newest first; ``before`` is the last ID of the previous page."""
    rows = await conn.fetch(
        "SELECT id, created_at, client_id, kind, body FROM feedback WHERE tenant_id = $1"
        " AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3",
        tenant_id, before, limit,
    )
    return [StoredReport(id=r["id"], created_at=r["created_at"], client_id=r["client_id"], kind=r["kind"],
                         task=str(r["body"].get("task", "")), description=str(r["body"].get("description", "")))
            for r in rows]
