"""Finished messages are pruned chunk after chunk within a time budget, aged from when they
finished; a pending message is never pruned."""

from __future__ import annotations

from datetime import timedelta

from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.message_pruning import prune_messages
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint

RETENTION = timedelta(days=30)


async def _seed(runtime: Runtime, actor: Actor, kek: Kek, count: int, *, state: str, created_days_ago: int,
                finished_days_ago: int | None) -> tuple[str, list[str]]:
    async with runtime.pool.acquire() as conn:
        endpoint_id = (await create_endpoint(conn, actor, url="http://127.0.0.1:9/prune", kek=kek, now=runtime.clock(),
                                             allow_insecure=True)).endpoint.id
        now = runtime.clock()
        created = now - timedelta(days=created_days_ago)
        finished = None if finished_days_ago is None else now - timedelta(days=finished_days_ago)
        ids = [r["id"] for r in await conn.fetch(
            "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, state,"
            " next_attempt_at, created_at, finished_at) SELECT $1, 'msg_prune_' || $2 || '_' || n, $2,"
            " 'domain.verified', '{}', 'event', $3, $4, $4, $5 FROM generate_series(1, $6) AS n RETURNING id",
            actor.tenant_id, endpoint_id, state, created, finished, count)]
    return endpoint_id, ids


async def _left(runtime: Runtime, ids: list[str]) -> int:
    async with runtime.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE id = ANY($1)", ids))


async def test_one_run_prunes_a_backlog_many_chunks_deep(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    _, old = await _seed(runtime, actor, kek, 2500, state="exhausted", created_days_ago=60, finished_days_ago=40)
    _, slow = await _seed(runtime, actor, kek, 5, state="delivered", created_days_ago=60, finished_days_ago=2)
    _, waiting = await _seed(runtime, actor, kek, 5, state="pending", created_days_ago=90, finished_days_ago=None)

    deleted = await prune_messages(runtime.pool, runtime.clock(), RETENTION, chunk=400)

    assert deleted >= 2500 and await _left(runtime, old) == 0  # one run, more than 6 chunks
    assert await _left(runtime, slow) == 5  # written 60 days ago, finished 2 days ago: kept
    assert await _left(runtime, waiting) == 5


async def test_a_run_stops_when_its_time_budget_is_spent(runtime: Runtime, actor: Actor, kek: Kek) -> None:
    _, old = await _seed(runtime, actor, kek, 1000, state="aborted", created_days_ago=60, finished_days_ago=45)
    ticks = iter([0.0, 10.0, 60.0, 60.0, 60.0])

    deleted = await prune_messages(runtime.pool, runtime.clock(), RETENTION, chunk=300, budget=50.0,
                                   monotonic=lambda: next(ticks))

    assert deleted == 600  # two chunks: the budget ran out after the second
    # The prune is global and other tests' finished messages may be among the 600; so: at
    # least 400 of these are left, and a run with the default budget takes the rest.
    assert await _left(runtime, old) >= 400
    await prune_messages(runtime.pool, runtime.clock(), RETENTION, chunk=300)
    assert await _left(runtime, old) == 0
