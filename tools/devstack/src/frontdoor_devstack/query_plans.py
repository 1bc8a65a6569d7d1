"""The plans of the hot queries, taken from the code that runs them (issue #15 §3).

`ExplainingConnection` wraps an asyncpg connection: before each statement it runs
``EXPLAIN (FORMAT JSON)`` of the same SQL with the same arguments and keeps the plan, then
runs the statement itself, so the repository functions work as usual and nothing here
restates their SQL. `exercise_hot_paths` calls the functions behind the Session grant,
introspection, the confirm and the dashboard's heaviest pages for one tenant of a seeded
database (``frontdoor_devstack.scale_seed``); `sequential_scans` lists every Seq Scan in
the plans. tests/integration/test_hot_query_plans.py and ``bench/scale.py --explain`` use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

__all__ = ["ExplainingConnection", "Plan", "exercise_hot_paths", "sequential_scans"]

_DML = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")


@dataclass
class Plan:
    """One statement a hot path ran, and its plan."""

    path: str
    sql: str
    plan: dict[str, Any]

    def nodes(self) -> Iterator[dict[str, Any]]:
        stack = [self.plan]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.get("Plans", []))


@dataclass
class ExplainingConnection:
    """An asyncpg connection that records the plan of every statement it runs (see the module doc)."""

    conn: asyncpg.Connection
    path: str = ""
    plans: list[Plan] = field(default_factory=list)

    async def _explain(self, sql: str, args: tuple[Any, ...]) -> None:
        if not sql.lstrip().upper().startswith(_DML):
            return
        async with self.conn.transaction():  # a savepoint when inside the caller's transaction
            raw = await self.conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
        doc = json.loads(raw) if isinstance(raw, str) else raw
        self.plans.append(Plan(self.path, " ".join(sql.split()), doc[0]["Plan"]))

    async def fetch(self, sql: str, *args: Any, **kw: Any) -> Any:
        await self._explain(sql, args)
        return await self.conn.fetch(sql, *args, **kw)

    async def fetchrow(self, sql: str, *args: Any, **kw: Any) -> Any:
        await self._explain(sql, args)
        return await self.conn.fetchrow(sql, *args, **kw)

    async def fetchval(self, sql: str, *args: Any, **kw: Any) -> Any:
        await self._explain(sql, args)
        return await self.conn.fetchval(sql, *args, **kw)

    async def execute(self, sql: str, *args: Any, **kw: Any) -> Any:
        if args:
            await self._explain(sql, args)
        return await self.conn.execute(sql, *args, **kw)

    def __getattr__(self, name: str) -> Any:  # transaction(), executemany, ...
        return getattr(self.conn, name)


_SCANS = frozenset({"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Index Scan"})


def sequential_scans(plans: list[Plan], *, ignore: frozenset[str] = frozenset()) -> list[tuple[str, str, str]]:
    """(path, table or index, SQL) of every scan that reads a whole table or index.

    A Seq Scan, and an index scan without an index condition: with ``enable_seqscan = off``
    the planner walks a whole index rather than the table when no index fits, which is the
    same full read. Tables (or indexes) in ``ignore`` are left out.
    """
    found = []
    for p in plans:
        for n in p.nodes():
            if n.get("Node Type") not in _SCANS or n.get("Index Cond"):
                continue
            name = n.get("Relation Name") or n.get("Index Name", "?")
            if name not in ignore:
                found.append((p.path, name, p.sql))
    return found


async def exercise_hot_paths(conn: asyncpg.Connection, *, now: datetime | None = None) -> list[Plan]:
    """Run each hot path's repository calls once for a seeded tenant that has a proposed operation.

    Writes what the paths write (a Session, a confirm with its perform message); run it on a
    test database.
    """
    from frontdoor_identity.agent_policy import get_agent_policy
    from frontdoor_identity.agents import list_agents, record_seen
    from frontdoor_operations import ledger, overview
    from frontdoor_sessions import session_directory, session_store
    from frontdoor_tenancy import audit
    from frontdoor_webhooks.attempts import list_attempts
    from frontdoor_webhooks.messages import list_messages

    now = now or datetime.now(UTC)
    probe = await conn.fetchrow("SELECT tenant_id, id, client_id FROM operations WHERE state = 'proposed'"
                                " AND expires_at > now() ORDER BY id LIMIT 1")
    if probe is None:
        raise RuntimeError("no proposed operation: seed the database first (frontdoor_devstack.scale_seed)")
    tenant_id, operation_id, client_id = probe["tenant_id"], probe["id"], probe["client_id"]
    message = await conn.fetchrow("SELECT id, endpoint_id FROM webhook_messages WHERE tenant_id = $1 LIMIT 1",
                                  tenant_id)
    c = ExplainingConnection(conn)
    day_ago, month_ago = now - timedelta(days=1), now - timedelta(days=30)

    c.path = "session grant"
    session = await session_store.create_session_if_allowed(c, tenant_id, client_id, "user-probe", now=now)  # type: ignore[arg-type]
    await record_seen(c, tenant_id, client_id, name="Scale Agent", logo=None, now=now)  # type: ignore[arg-type]

    c.path = "introspection"
    assert session is not None
    await session_store.find_session(c, tenant_id, session.id)  # type: ignore[arg-type]
    await get_agent_policy(c, tenant_id, client_id=client_id)  # type: ignore[arg-type]

    c.path = "confirm"
    await ledger.get_operation(c, tenant_id, operation_id)  # type: ignore[arg-type]
    await ledger.revisions(c, tenant_id, operation_id)  # type: ignore[arg-type]
    await ledger.confirm(c, tenant_id, operation_id, revision=1, approved_by="user", via="agent", now=now)  # type: ignore[arg-type]

    c.path = "dashboard overview"
    await overview.delivery_health(c, tenant_id, now=now)  # type: ignore[arg-type]
    await overview.failed_attempts_by_day(c, tenant_id, since=month_ago)  # type: ignore[arg-type]
    await overview.daily_operations(c, tenant_id, since=month_ago)  # type: ignore[arg-type]
    await overview.count_by_state(c, tenant_id, since=day_ago)  # type: ignore[arg-type]
    await overview.count_stuck(c, tenant_id, now=now)  # type: ignore[arg-type]

    c.path = "dashboard lists"
    await overview.list_filtered(c, tenant_id, ledger.ListFilters(), now=now)  # type: ignore[arg-type]
    await ledger.list_operations(c, tenant_id, ledger.ListFilters(state="succeeded"))  # type: ignore[arg-type]
    await session_directory.list_sessions(c, tenant_id)  # type: ignore[arg-type]
    await session_directory.list_sessions(c, tenant_id, client_id=client_id)  # type: ignore[arg-type]
    await list_agents(c, tenant_id)  # type: ignore[arg-type]
    await audit.list_entries(c, tenant_id)  # type: ignore[arg-type]
    if message is not None:
        await list_messages(c, tenant_id, endpoint_id=message["endpoint_id"])  # type: ignore[arg-type]
        await list_attempts(c, tenant_id, message["id"])  # type: ignore[arg-type]
    return c.plans
