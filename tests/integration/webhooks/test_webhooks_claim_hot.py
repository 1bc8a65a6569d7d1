"""A claim is a HOT update, and "retrying" means pending after a failed attempt.

Every attempt starts with a claim (``attempts + 1`` and a lease) and may have its lease
renewed or be handed back unused. None of these may change a column that an index of
``webhook_messages`` keys on or filters by: then PostgreSQL writes the new row version on
the same page without an entry in each of the table's indexes (a heap-only tuple). Read
from PostgreSQL's own counters (``pg_stat_user_tables``) in a database of the test's own,
through the functions the deliverer and the ledger's fast path call.

The dashboard's "retrying" count follows one message through the real delivery path: a
message in its first attempt is not retrying; after a failed attempt it is, until it is
delivered, exhausted or queued again by hand. The migration gives rows written before it the
same meaning, from their attempt rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from frontdoor_core.db import create_pool
from frontdoor_core.ids import new_id
from frontdoor_core.migrations import MIGRATED_PACKAGES, apply_migrations, discover
from frontdoor_core.runtime import Runtime
from frontdoor_operations import overview
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint, deliver, enqueue_message, recover, redeliver
from frontdoor_webhooks.claims import claim_due, extend_lease, release_claims
from frontdoor_webhooks.delivery import ClaimedMessage, claim
from frontdoor_webhooks.endpoint_secrets import signing_secrets
from webhooks_receiver import Receiver, Reply

from tests.conftest import unique
from tests.support.clock import ShiftableClock
from tests.support.databases import connected, own_database
from tests.support.servers import Servers


@pytest.fixture
async def pool(servers: Servers) -> AsyncIterator[asyncpg.Pool]:
    """A pool of one connection on a database of this test's own: every statement runs in one backend."""
    async with own_database(servers, "fd_claim_hot") as url:
        p = await create_pool(url, min_size=1, max_size=1)
        try:
            yield p
        finally:
            await p.close()


async def _setup(pool: asyncpg.Pool, kek: Kek, url: str, now: datetime) -> tuple[Actor, str]:
    tenant_id = new_id("ten")
    async with pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ($1, $2, 'Hot Co')",
                           tenant_id, unique("hot-"))
        actor = Actor(tenant_id=tenant_id, type="api_key", id="key_test", request_id="req_test")
        created = await create_endpoint(conn, actor, url=url, kek=kek, now=now, event_types=("operation.succeeded",),
                                        allow_insecure=True)
    return actor, created.endpoint.id


async def _enqueue(pool: asyncpg.Pool, tenant_id: str, endpoint_id: str, count: int, now: datetime) -> list[str]:
    async with pool.acquire() as conn, conn.transaction():
        return [await enqueue_message(conn, tenant_id, endpoint_id, "operation.succeeded", {"n": i},
                                      purpose="event", now=now) for i in range(count)]


async def _updates(pool: asyncpg.Pool) -> tuple[int, int]:
    """``webhook_messages``' updates and HOT updates so far, as PostgreSQL counts them."""
    async with pool.acquire() as conn:
        # The one backend's pending counts reach the shared statistics when this statement ends.
        await conn.execute("SELECT pg_stat_force_next_flush()")
        row = await conn.fetchrow("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                                  " WHERE relname = 'webhook_messages'")
    assert row is not None
    return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


async def test_claims_lease_renewals_and_hand_backs_are_hot_updates(
        pool: asyncpg.Pool, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/hook", Reply(status=204, body=b""))
    clock, policy = deps["clock"], deps["policy"]
    actor, endpoint_id = await _setup(pool, kek, receiver.url("/hook"), clock())
    ids = await _enqueue(pool, actor.tenant_id, endpoint_id, 6, clock())
    before = await _updates(pool)

    # The deliverer: a batch claimed with claim_due, each then sent and settled by deliver.
    async with pool.acquire() as conn:
        claims, found = await claim_due(conn, clock(), policy.lease, limit=3, choose=lambda c: c)
    assert found == 3 and [c.id for c, _ in claims] == ids[:3]
    for claimed, _ in claims:
        report = await deliver(pool, claimed.id, claimed=claimed, **deps)
        assert report is not None and report.state == "delivered"
    # deliver's own claim: with the endpoint's secrets in the same statement (the ledger's fast
    # path), and the plain claim beside a secret source (a deliverer's cache).
    report = await deliver(pool, ids[3], **deps)
    assert report is not None and report.state == "delivered" and report.attempt == 1

    async def secrets(p: asyncpg.Pool, claimed: ClaimedMessage, at: datetime) -> list[str]:
        async with p.acquire() as conn:
            return await signing_secrets(conn, claimed.tenant_id, claimed.endpoint_id, kek, at)

    report = await deliver(pool, ids[4], secrets=secrets, **deps)
    assert report is not None and report.state == "delivered" and report.attempt == 1
    # A claim waiting for its endpoint's turn: renewed, then handed back unused (a deliverer stopping).
    async with pool.acquire() as conn:
        [(waiting, _)], _ = await claim_due(conn, clock(), policy.lease, limit=1, choose=lambda c: c)
        renewed = await extend_lease(conn, waiting, clock(), policy.lease * 2)
        assert renewed is not None
        assert await release_claims(conn, [renewed]) == 1
        again = await claim(conn, ids[5], clock(), policy.lease)
        assert again is not None and again.attempt == 1
    assert [r.path for r in receiver.received] == ["/hook"] * 5

    updates, hot = (now - then for now, then in zip(await _updates(pool), before, strict=True))
    # 7 claims (3 + 1 + 1 + 2), a renewal and a hand-back: HOT. The 5 settles change the state: not.
    assert (updates, hot) == (14, 9)


async def _retrying(runtime: Runtime, tenant_id: str) -> int:
    async with runtime.pool.acquire() as conn:
        return (await overview.delivery_health(conn, tenant_id, now=runtime.clock())).retrying


async def test_retrying_counts_messages_pending_after_a_failed_attempt(
        runtime: Runtime, clock: ShiftableClock, actor: Actor, kek: Kek, receiver: Receiver,
        deps: dict[str, Any]) -> None:
    receiver.script("/hook", *[Reply(status=503)] * 6, Reply(status=204, body=b""))
    policy = deps["policy"]
    async with runtime.pool.acquire() as conn:
        endpoint = await create_endpoint(conn, actor, url=receiver.url("/hook"), kek=kek, now=clock(),
                                         event_types=("operation.succeeded",), allow_insecure=True)
        [message_id, _other] = [await enqueue_message(conn, actor.tenant_id, endpoint.endpoint.id,
                                                      "operation.succeeded", {"n": i}, purpose="event", now=clock())
                                for i in range(2)]
        # In its first attempt (claimed, not answered yet): in flight, not retrying.
        claimed = await claim(conn, message_id, clock(), policy.lease)
        assert claimed is not None and claimed.attempt == 1
    assert await _retrying(runtime, actor.tenant_id) == 0

    report = await deliver(runtime.pool, message_id, claimed=claimed, **deps)
    assert report is not None and report.state == "pending" and report.status == 503
    assert await _retrying(runtime, actor.tenant_id) == 1
    # Its second attempt in flight: still retrying (an attempt failed).
    clock.advance(seconds=policy.retry.schedule[1].total_seconds())
    async with runtime.pool.acquire() as conn:
        second = await claim(conn, message_id, clock(), policy.lease)
    assert second is not None and second.attempt == 2
    assert await _retrying(runtime, actor.tenant_id) == 1
    report = await deliver(runtime.pool, message_id, claimed=second, **deps)
    assert report is not None and report.state == "pending"
    # Queued again by hand: a fresh schedule, no failed attempt in it yet.
    async with runtime.pool.acquire() as conn:
        await redeliver(conn, actor, message_id, now=clock())
    assert await _retrying(runtime, actor.tenant_id) == 0
    # Failed until exhausted (the schedule has 4 attempts): finished, not retrying; then recovered.
    for attempt in range(1, len(policy.retry.schedule) + 1):
        report = await deliver(runtime.pool, message_id, **deps)
        assert report is not None and report.attempt == attempt
        if report.state == "pending":
            assert await _retrying(runtime, actor.tenant_id) == 1
            clock.advance(seconds=policy.retry.schedule[attempt].total_seconds())
    assert report.state == "exhausted"
    assert await _retrying(runtime, actor.tenant_id) == 0
    async with runtime.pool.acquire() as conn:
        assert await recover(conn, actor, endpoint.endpoint.id, since=clock().replace(year=2000), now=clock()) == 1
    assert await _retrying(runtime, actor.tenant_id) == 0
    # The 7th answer is a 204: delivered, not retrying.
    report = await deliver(runtime.pool, message_id, **deps)
    assert report is not None and report.state == "delivered"
    assert await _retrying(runtime, actor.tenant_id) == 0


async def test_the_migration_sets_failed_at_of_pending_messages_whose_attempt_failed(servers: Servers) -> None:
    """Rows written before ``webhook_messages_failed_at``: failed_at from the current schedule's attempt rows."""
    migrations = discover(MIGRATED_PACKAGES)
    async with own_database(servers, "fd_failed_at", migrated=False) as url, connected(url) as conn:
        await apply_migrations(conn, [m for m in migrations if m.version < "20270104010000"])
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ('ten_b', 'b', 'B')")
        await conn.execute("INSERT INTO webhook_endpoints (tenant_id, id, url, created_at, updated_at)"
                           " VALUES ('ten_b', 'whe_b', 'https://hooks.example/b', now(), now())")
        # id: state, attempts, leased (an attempt in flight)
        messages = {"msg_failed_twice": ("pending", 2, False), "msg_first_attempt": ("pending", 1, True),
                    "msg_redelivered_first": ("pending", 1, True), "msg_second_attempt": ("pending", 2, True),
                    "msg_delivered": ("delivered", 2, False), "msg_new": ("pending", 0, False)}
        for message_id, (state, attempts, leased) in messages.items():
            await conn.execute(
                "INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, state, attempts,"
                " next_attempt_at, locked_until, created_at) VALUES ('ten_b', $1, 'whe_b', 'operation.succeeded',"
                " '{}', 'event', $2, $3, now(), CASE WHEN $4 THEN now() + interval '30 seconds' END,"
                " now() - interval '1 hour')", message_id, state, attempts, leased)
        # message, attempt, minutes ago, failed
        attempts = [("msg_failed_twice", 1, 30, True), ("msg_failed_twice", 2, 20, True),
                    ("msg_redelivered_first", 1, 40, True),  # before a redelivery reset attempts
                    ("msg_second_attempt", 1, 10, True), ("msg_delivered", 1, 50, True),
                    ("msg_delivered", 2, 45, False)]
        for n, (message_id, attempt, ago, failed) in enumerate(attempts):
            await conn.execute(
                "INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url, started_at,"
                " duration_ms, response_status, error_class, request_headers) VALUES ('ten_b', $1, $2, 'whe_b', $3,"
                " 'https://hooks.example/b', date_trunc('second', now()) - make_interval(mins => $4), 250,"
                " CASE WHEN $5 THEN 503 ELSE 200 END, CASE WHEN $5 THEN 'http_status' END, '{}')",
                f"att_b{n}", message_id, attempt, ago, failed)

        await apply_migrations(conn, migrations)

        failed_at = {r["id"]: r["failed_at"] for r in await conn.fetch("SELECT id, failed_at FROM webhook_messages")}
        ended = {r["message_id"]: r["ended"] for r in await conn.fetch(
            "SELECT message_id, started_at + interval '250 milliseconds' AS ended FROM webhook_attempts"
            " WHERE (message_id, attempt) IN (('msg_failed_twice', 2), ('msg_second_attempt', 1))")}
        assert failed_at == {"msg_failed_twice": ended["msg_failed_twice"], "msg_first_attempt": None,
                             "msg_redelivered_first": None, "msg_second_attempt": ended["msg_second_attempt"],
                             "msg_delivered": None, "msg_new": None}
        assert (await overview.delivery_health(conn, "ten_b", now=datetime.now(UTC))).retrying == 2
