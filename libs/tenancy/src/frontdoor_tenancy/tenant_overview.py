"""Read-only summaries of one tenant for the admin dashboard (counts, filter choices)."""

from __future__ import annotations

import asyncpg
import msgspec

__all__ = ["TenantCounts", "audit_actions", "tenant_counts"]


class TenantCounts(msgspec.Struct, frozen=True, kw_only=True):
    """What the overview shows of the tenant's own configuration.

    Attributes:
        domains_by_status: claims per status (``pending``, ``verified``, ...); absent statuses omitted.
        active_api_keys: keys not revoked.
        admins: admin accounts of the tenant.
    """

    domains_by_status: dict[str, int]
    active_api_keys: int
    admins: int


async def tenant_counts(conn: asyncpg.Connection, tenant_id: str) -> TenantCounts:
    """Count the tenant's domains by status, its live API keys and its admins."""
    rows = await conn.fetch(
        "SELECT status, count(*) AS n FROM domains WHERE tenant_id = $1 GROUP BY status ORDER BY status", tenant_id
    )
    keys = await conn.fetchval(
        "SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL", tenant_id
    )
    admins = await conn.fetchval("SELECT count(*) FROM admins WHERE tenant_id = $1", tenant_id)
    return TenantCounts(domains_by_status={r["status"]: int(r["n"]) for r in rows}, active_api_keys=int(keys),
                        admins=int(admins))


async def audit_actions(conn: asyncpg.Connection, tenant_id: str) -> list[str]:
    """The distinct actions in the tenant's audit log, sorted (the log's filter choices)."""
    rows = await conn.fetch(
        "SELECT DISTINCT action FROM audit_log WHERE tenant_id = $1 ORDER BY action LIMIT 500", tenant_id
    )
    return [r["action"] for r in rows]
