"""Pruning the domain outboxes over real PostgreSQL: forwarded rows older than the retention
go, in bounded chunks; an unforwarded row stays however old it is.

Pruning is global (every tenant), so these tests live in the year 2001: no other test's rows
were forwarded before their cut-off, and the counts are exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.outbox_pruning import prune_outboxes
from frontdoor_sessions import session_events
from frontdoor_tenancy import outbox_events

NOW = datetime(2001, 2, 1, tzinfo=UTC)
RETENTION = timedelta(days=30)  # cut-off: 2001-01-02
OLD = datetime(2001, 1, 1, tzinfo=UTC)
RECENT = datetime(2001, 1, 20, tzinfo=UTC)
SIGNED_OUT = {"session_id": "ses_1", "client_id": "https://agent.example/a.json", "user_id": "u",
              "sign_in_id": "sgn_1", "reason": "disconnected"}
SUSPENDED = {"domain": "shop.example.com", "missing_since": "2000-12-01T00:00:00Z"}


@pytest.fixture
async def cleanup(runtime: Runtime, tenant_id: str) -> AsyncIterator[None]:
    yield
    async with runtime.pool.acquire() as conn:  # leave no unforwarded row for the forwarder tests
        await conn.execute("DELETE FROM session_events WHERE tenant_id = $1", tenant_id)
        await conn.execute("DELETE FROM outbox_events WHERE tenant_id = $1", tenant_id)


async def _session_event(runtime: Runtime, tenant_id: str, forwarded_at: datetime | None) -> str:
    async with runtime.pool.acquire() as conn:
        event_id = await session_events.record_event(conn, tenant_id, "session.signed_out", SIGNED_OUT,
                                                     now=datetime(2000, 12, 1, tzinfo=UTC))
        await conn.execute("UPDATE session_events SET forwarded_at = $3 WHERE tenant_id = $1 AND id = $2",
                           tenant_id, event_id, forwarded_at)
    return event_id


async def _domain_event(runtime: Runtime, tenant_id: str, forwarded_at: datetime | None) -> str:
    async with runtime.pool.acquire() as conn:
        event_id = await outbox_events.record_event(conn, tenant_id, "domain.suspended", SUSPENDED,
                                                    now=datetime(2000, 12, 1, tzinfo=UTC))
        await conn.execute("UPDATE outbox_events SET forwarded_at = $3 WHERE tenant_id = $1 AND id = $2",
                           tenant_id, event_id, forwarded_at)
    return event_id


async def _left(runtime: Runtime, table: str, tenant_id: str) -> set[str]:
    rows = await runtime.pool.fetch(f"SELECT id FROM {table} WHERE tenant_id = $1", tenant_id)
    return {r["id"] for r in rows}


@pytest.mark.usefixtures("cleanup")
async def test_only_rows_forwarded_before_the_retention_are_pruned(runtime: Runtime, tenant_id: str) -> None:
    for table, record, prune in (("session_events", _session_event, session_events.prune_forwarded),
                                 ("outbox_events", _domain_event, outbox_events.prune_forwarded)):
        old = await record(runtime, tenant_id, OLD)
        recent = await record(runtime, tenant_id, RECENT)
        waiting = await record(runtime, tenant_id, None)  # created long ago, never forwarded
        async with runtime.pool.acquire() as conn:
            assert await prune(conn, NOW, RETENTION) == 1, table
            assert await _left(runtime, table, tenant_id) == {recent, waiting}
            assert await prune(conn, NOW, RETENTION) == 0
            # Years later, the forwarded row goes too; the unforwarded one never does.
            assert await prune(conn, NOW + timedelta(days=3650), RETENTION) >= 1
            assert waiting in await _left(runtime, table, tenant_id)
            assert old not in await _left(runtime, table, tenant_id)
            with pytest.raises(ValueError, match="limit"):
                await prune(conn, NOW, RETENTION, limit=0)


@pytest.mark.usefixtures("cleanup")
async def test_a_backlog_is_pruned_in_bounded_chunks_across_runs(runtime: Runtime, tenant_id: str) -> None:
    for _ in range(5):
        await _session_event(runtime, tenant_id, OLD)
    for _ in range(3):
        await _domain_event(runtime, tenant_id, OLD)
    kept = await _session_event(runtime, tenant_id, None)
    # One run: at most 2 chunks of 2 per outbox; the next run goes on.
    assert await prune_outboxes(runtime.pool, NOW, RETENTION, chunk=2, max_chunks=2) == {
        "session_events": 4, "outbox_events": 3}
    assert len(await _left(runtime, "session_events", tenant_id)) == 2
    assert await _left(runtime, "outbox_events", tenant_id) == set()
    assert await prune_outboxes(runtime.pool, NOW, RETENTION, chunk=2, max_chunks=2) == {
        "session_events": 1, "outbox_events": 0}
    assert await _left(runtime, "session_events", tenant_id) == {kept}
    assert await prune_outboxes(runtime.pool, NOW, RETENTION, chunk=2, max_chunks=2) == {
        "session_events": 0, "outbox_events": 0}
    assert await _left(runtime, "session_events", tenant_id) == {kept}
