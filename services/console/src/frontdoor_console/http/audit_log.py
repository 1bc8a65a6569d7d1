"""``GET /api/v1/audit-log``: newest first, paginated by ``before``."""

from __future__ import annotations

import msgspec
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor
from litestar import get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import Parameter

from .deps import ctx_of
from .problems import PROBLEMS

__all__ = ["audit_log"]


class AuditPage(msgspec.Struct, frozen=True, kw_only=True):
    data: list[audit.AuditEntry]
    next_before: str | None


@get("/api/v1/audit-log", responses=PROBLEMS, tags=["audit"], summary="Read the audit log")
async def audit_log(
    actor: NamedDependency[Actor],
    state: State,
    limit: int = Parameter(default=50, ge=1, le=200),
    before: str | None = Parameter(default=None, max_length=40),
    action: str | None = Parameter(default=None, max_length=64),
) -> AuditPage:
    async with ctx_of(state).pool.acquire() as conn:
        rows = await audit.list_entries(conn, actor.tenant_id, limit=limit, before=before, action=action)
    return AuditPage(data=rows, next_before=rows[-1].id if len(rows) == limit else None)
