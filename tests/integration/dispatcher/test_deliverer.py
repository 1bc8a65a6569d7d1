"""The deliverer over real PostgreSQL: woken by NOTIFY, claims straight from the table,
two replicas never send one attempt twice, clean answers recorded in batches, a stop hands
back what it had not started."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from frontdoor_core.outbound import FetchResult, OutboundPolicy, SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher import deliverer as deliverer_module
from frontdoor_dispatcher.deliverer import Deliverer
from frontdoor_dispatcher.lanes import Lanes
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy
from frontdoor_webhooks.claims import Candidate, claim_due, extend_lease, release_claims
from frontdoor_webhooks.delivered_batch import DeliveredBatch
from frontdoor_webhooks.delivery_client import DeliveryClient
from frontdoor_webhooks.messages import enqueue_message
from frontdoor_webhooks.sender import SafeSender
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.eventually import eventually
from tests.support.mock_web import MockWeb

POLICY = DeliveryPolicy(
    retry=RetryPolicy(schedule=(timedelta(0), timedelta(seconds=30)), jitter=0.0, retry_after_max=timedelta(minutes=1)),
    timeout=timedelta(seconds=3), lease=timedelta(seconds=5), disable_after=timedelta(hours=1))


@asynccontextmanager
async def running(deliverer: Deliverer) -> AsyncIterator[Deliverer]:
    task = asyncio.create_task(deliverer.run())
    try:
        await asyncio.sleep(0.3)  # listening
        yield deliverer
    finally:
        deliverer.stop()
        await asyncio.wait_for(task, 15)


def make(runtime: Runtime, web: MockWeb, kek: Kek, **kw: Any) -> Deliverer:
    sender = SafeSender(SafeFetcher(transport=web))
    return Deliverer(runtime.settings.database_url, runtime.pool, sender=sender, kek=kek, policy=POLICY,
                     clock=runtime.clock, **{"idle_wake": 30.0, **kw})


async def endpoint(console: AsyncTestClient[Any], tenant: TenantHandle, web: MockWeb,
                   seen: list[str], status: int = 204) -> str:
    hook = f"https://{unique('deliverer-')}.example/hook"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    secret = r.json()["secret"]

    async def receive(request: httpx.Request) -> httpx.Response:
        Webhook(secret).verify(request.content, dict(request.headers))
        seen.append(request.headers["webhook-id"])
        return httpx.Response(status)

    web.handle(hook, receive)
    return str(r.json()["endpoint"]["id"])


async def enqueue(runtime: Runtime, tenant_id: str, endpoint_id: str, count: int,
                  ago: timedelta = timedelta(0)) -> list[str]:
    async with runtime.pool.acquire() as conn, conn.transaction():
        return [await enqueue_message(conn, tenant_id, endpoint_id, "operation.succeeded", {"n": i},
                                      purpose="event", now=runtime.clock() - ago) for i in range(count)]


async def test_wakes_on_notify_and_every_message_arrives_once_recorded_in_batches(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    deliverer = make(runtime, web, Kek.from_env_value(kek_value))
    async with running(deliverer):
        ids = await enqueue(runtime, tenant.id, ep, 40)

        # idle_wake is 30 s: only the NOTIFY can wake the deliverer this fast.
        async def all_delivered() -> None:
            assert sorted(seen) == sorted(ids)
            async with runtime.pool.acquire() as conn:
                states = await conn.fetch("SELECT state, attempts, locked_until FROM webhook_messages"
                                          " WHERE id = ANY($1)", ids)
            assert [(s["state"], s["attempts"], s["locked_until"]) for s in states] == [("delivered", 1, None)] * 40

        await eventually(all_delivered, timeout=10.0)
    assert len(seen) == len(set(seen)) == 40
    assert deliverer._delivered.batches < 40  # several attempts per transaction
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT tenant_id, response_status, error_class, request_headers FROM webhook_attempts"
                                " WHERE message_id = ANY($1)", ids)
    assert len(rows) == 40
    assert {(r["tenant_id"], r["response_status"], r["error_class"]) for r in rows} == {(tenant.id, 204, None)}
    assert all(r["request_headers"]["webhook-signature"] == "[redacted]" for r in rows)


async def test_a_failed_answer_is_settled_one_by_one_on_the_retry_schedule(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen, status=500)
    async with running(make(runtime, web, Kek.from_env_value(kek_value))):
        [mid] = await enqueue(runtime, tenant.id, ep, 1)

        async def retried() -> None:
            async with runtime.pool.acquire() as conn:
                row = await conn.fetchrow("SELECT state, attempts, next_attempt_at, last_status FROM webhook_messages"
                                          " WHERE id = $1", mid)
            assert row["state"] == "pending" and row["attempts"] == 1 and row["last_status"] == 500
            assert row["next_attempt_at"] > runtime.clock() + timedelta(seconds=20)  # the schedule's 30 s

        await eventually(retried, timeout=10.0)
    assert seen == [mid]


async def test_at_most_per_endpoint_posts_run_at_once_and_recording_takes_no_turn_or_share(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    hook = f"https://{unique('turns-')}.example/hook"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook}, headers=tenant.auth)
    ep = r.json()["endpoint"]["id"]
    running_now, most, outstanding, seen = [0], [0], [0], []

    async def slow(request: httpx.Request) -> httpx.Response:
        running_now[0] += 1
        most[0] = max(most[0], running_now[0])
        # POSTs running plus answered deliveries still waiting for their batch
        outstanding[0] = max(outstanding[0], running_now[0] + len(deliverer._delivered._pending))
        await asyncio.sleep(0.03)
        running_now[0] -= 1
        seen.append(request.headers["webhook-id"])
        return httpx.Response(204)

    web.handle(hook, slow)
    deliverer = make(runtime, web, Kek.from_env_value(kek_value), lanes=Lanes(per_endpoint=3, per_endpoint_waiting=5))
    # Each delivery waits 0.5 s for its batch: were the endpoint's permit or its share of the
    # claims (3 + 5) held while recording, its POSTs would stall behind the batches.
    deliverer._delivered = DeliveredBatch(runtime.pool, max_wait=0.5)
    async with running(deliverer):
        ids = await enqueue(runtime, tenant.id, ep, 30)

        async def all_delivered() -> None:
            async with runtime.pool.acquire() as conn:
                states = await conn.fetch("SELECT state FROM webhook_messages WHERE id = ANY($1)", ids)
            assert [s["state"] for s in states] == ["delivered"] * 30

        await eventually(all_delivered, timeout=15.0)
    assert sorted(seen) == sorted(ids)
    assert most[0] == 3  # the cap was reached and never passed
    # POSTs went on, past the endpoint's whole share, while earlier deliveries waited to be recorded
    assert outstanding[0] > 3 + 5


async def test_two_replicas_never_send_one_attempt_twice(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    seen: list[str] = []
    hook = f"https://{unique('replicas-')}.example/hook"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook}, headers=tenant.auth)
    ep, secret = r.json()["endpoint"]["id"], r.json()["secret"]

    async def slow(request: httpx.Request) -> httpx.Response:  # one replica alone cannot take everything at once
        Webhook(secret).verify(request.content, dict(request.headers))
        seen.append(request.headers["webhook-id"])
        await asyncio.sleep(0.02)
        return httpx.Response(204)

    web.handle(hook, slow)
    kek = Kek.from_env_value(kek_value)
    sent_by: dict[str, list[str]] = {"a": [], "b": []}

    class Tagged(httpx.AsyncBaseTransport):
        """This replica's way to the mock web, noting which webhook-ids it sent."""

        def __init__(self, name: str) -> None:
            self.name = name

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.host == httpx.URL(hook).host:
                sent_by[self.name].append(request.headers["webhook-id"])
            return await web.handle_async_request(request)

    # The worker's database is shared with earlier tests: their leftover due messages may be
    # claimed too, so what is checked is this test's messages, by webhook-id and attempt rows.
    a, b = (Deliverer(runtime.settings.database_url, runtime.pool, sender=SafeSender(SafeFetcher(transport=Tagged(n))),
                      kek=kek, policy=POLICY, clock=runtime.clock, idle_wake=30.0, batch=16,
                      lanes=Lanes(per_endpoint=4, per_endpoint_waiting=4)) for n in "ab")
    async with running(a), running(b):
        ids = await enqueue(runtime, tenant.id, ep, 300)

        async def all_arrived() -> None:
            assert len(set(seen)) == 300

        await eventually(all_arrived, timeout=30.0)
    assert sorted(seen) == sorted(ids)  # each exactly once
    assert sent_by["a"] and sent_by["b"]  # both replicas took part
    assert sorted(sent_by["a"] + sent_by["b"]) == sorted(ids)
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT m.state, m.attempts, count(a.id) AS rows FROM webhook_messages AS m"
                                " LEFT JOIN webhook_attempts AS a ON a.tenant_id = m.tenant_id AND a.message_id = m.id"
                                " WHERE m.id = ANY($1) GROUP BY m.tenant_id, m.id, m.state, m.attempts", ids)
    assert [(r["state"], r["attempts"], r["rows"]) for r in rows] == [("delivered", 1, 1)] * 300


async def test_a_deliverer_holds_only_its_share_of_one_endpoint(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    await enqueue(runtime, tenant.id, ep, 50)
    lanes = Lanes(per_endpoint=2, per_endpoint_waiting=3)

    def choose(found: list[Candidate]) -> list[Candidate]:  # this test's messages only (the database is shared)
        return lanes.choose([c for c in found if c.endpoint_id == ep])

    async with runtime.pool.acquire() as conn:
        claims, found = await claim_due(conn, runtime.clock(), POLICY.lease, limit=50, choose=choose)
    assert found >= 5 and len(claims) == 5 and lanes.full_endpoints() == [ep]
    async with runtime.pool.acquire() as conn:  # the endpoint at its share is left out of the next claim
        again, _ = await claim_due(conn, runtime.clock(), POLICY.lease, limit=50, choose=choose,
                                   exclude_endpoints=lanes.full_endpoints())
        assert again == []
        # what was found but not chosen was not claimed: no attempt used, no lease
        leased = await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE endpoint_id = $1"
                                     " AND locked_until IS NOT NULL", ep)
        assert leased == 5
        assert await release_claims(conn, [c for c, _ in claims]) == 5
        assert await conn.fetchval("SELECT sum(attempts) FROM webhook_messages WHERE endpoint_id = $1", ep) == 0
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = $1", ep)


async def test_a_claim_answers_at_most_what_each_endpoint_has_room_for(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb) -> None:
    """A busy endpoint with room for a few is not read back by the hundred on every pass."""
    seen: list[str] = []
    held, other = await endpoint(console, tenant, web, seen), await endpoint(console, tenant, web, seen)
    await enqueue(runtime, tenant.id, held, 30)
    await enqueue(runtime, tenant.id, other, 30)
    found_of: dict[str, int] = {}

    def choose(found: list[Candidate]) -> list[Candidate]:  # takes nothing: only what was found is looked at
        for c in found:
            if c.endpoint_id in (held, other):
                found_of[c.endpoint_id] = found_of.get(c.endpoint_id, 0) + 1
        return []

    async with runtime.pool.acquire() as conn:
        claims, _ = await claim_due(conn, runtime.clock(), POLICY.lease, limit=200, choose=choose,
                                    rooms={held: 2}, room=3)
        assert claims == []
        assert found_of == {held: 2, other: 3}
        found_of.clear()
        await claim_due(conn, runtime.clock(), POLICY.lease, limit=200, choose=choose)  # no rooms: up to the limit
        assert found_of == {held: 30, other: 30}
        assert await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE endpoint_id = ANY($1)"
                                   " AND locked_until IS NOT NULL", [held, other]) == 0
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = ANY($1)", [held, other])


async def test_a_claim_locks_only_what_each_endpoint_has_room_for(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb) -> None:
    """A row lock is a write: a pass with room for 2 of a busy endpoint's 40 locks 2, not a batch."""
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    await enqueue(runtime, tenant.id, ep, 40)

    def nothing(found: list[Candidate]) -> list[Candidate]:
        return []

    async with runtime.pool.acquire() as conn:
        await claim_due(conn, runtime.clock(), POLICY.lease, limit=200, choose=nothing, rooms={ep: 2})
        # a row locked FOR UPDATE keeps the locker's transaction ID in xmax after the commit
        locked = await conn.fetchval("SELECT count(*) FROM webhook_messages WHERE endpoint_id = $1"
                                     " AND xmax::text <> '0'", ep)
        assert locked == 2
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = $1", ep)


async def test_rows_another_claim_holds_are_skipped_and_the_endpoints_next_rows_taken(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb) -> None:
    """Two deliverers claiming at once both get work: for each row skipped, one of the endpoint's next."""
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    ids = await enqueue(runtime, tenant.id, ep, 10, ago=timedelta(seconds=1))

    def mine(found: list[Candidate]) -> list[Candidate]:
        return [c for c in found if c.endpoint_id == ep]

    async with runtime.pool.acquire() as other, other.transaction(), runtime.pool.acquire() as conn:
        # another deliverer's claim, between its look-up and its commit: the three oldest rows locked
        await other.execute("SELECT 1 FROM webhook_messages WHERE id = ANY($1) FOR UPDATE", ids[:3])
        claims, _ = await claim_due(conn, runtime.clock(), POLICY.lease, limit=200, choose=mine, rooms={ep: 4})
        assert [c.id for c, _ in claims] == ids[3:7]  # its room's worth, past the locked rows
        await release_claims(conn, [c for c, _ in claims])
    async with runtime.pool.acquire() as conn:
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = $1", ep)


async def test_a_chosen_row_the_lease_did_not_take_is_handed_back_to_the_caller(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb) -> None:
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    ids = await enqueue(runtime, tenant.id, ep, 2)
    lanes = Lanes()
    # A row chosen but gone by the time of the lease (as when its endpoint is deleted meanwhile).
    ghost = Candidate(tenant.id, "msg_gone", ep)
    unclaimed: list[Candidate] = []

    def choose(found: list[Candidate]) -> list[Candidate]:
        return lanes.choose([c for c in found if c.endpoint_id == ep] + [ghost])

    def drop(candidate: Candidate) -> None:
        unclaimed.append(candidate)
        lanes.release(candidate.tenant_id, candidate.endpoint_id)

    async with runtime.pool.acquire() as conn:
        claims, _ = await claim_due(conn, runtime.clock(), POLICY.lease, limit=50, choose=choose, unclaimed=drop)
        assert sorted(c.id for c, _ in claims) == sorted(ids)
        assert unclaimed == [ghost]
        assert lanes.held == 2 and lanes.by_endpoint[ep] == 2  # only what it holds is counted
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = $1", ep)


async def test_a_lease_is_renewed_only_while_the_claim_is_still_ours(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb) -> None:
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    await enqueue(runtime, tenant.id, ep, 1)
    now = runtime.clock()

    def mine(found: list[Candidate]) -> list[Candidate]:
        return [c for c in found if c.endpoint_id == ep]

    async with runtime.pool.acquire() as conn:
        [(claimed, _)], _ = await claim_due(conn, now, POLICY.lease, limit=100, choose=mine)
        renewed = await extend_lease(conn, claimed, now + timedelta(seconds=3), POLICY.lease)
        assert renewed is not None and renewed.locked_until == now + timedelta(seconds=8)
        # the old lease end is no longer the claim's: a stale holder cannot renew it
        assert await extend_lease(conn, claimed, now + timedelta(seconds=4), POLICY.lease) is None
        # after the lease ended another process claims the message (attempt 2): the first cannot renew
        [(second, _)], _ = await claim_due(conn, now + timedelta(seconds=9), POLICY.lease, limit=100, choose=mine)
        assert second.attempt == 2
        assert await extend_lease(conn, renewed, now + timedelta(seconds=9), POLICY.lease) is None
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = $1", ep)


async def test_a_second_tenants_claim_is_not_stopped_by_the_first_tenants_share(
        console: AsyncTestClient[Any], runtime: Runtime, web: MockWeb) -> None:
    from tests.integration.conftest import sign_up

    first, second = await sign_up(console), await sign_up(console)
    seen: list[str] = []
    ep1 = await endpoint(console, first, web, seen)
    ep2 = await endpoint(console, second, web, seen)
    await enqueue(runtime, first.id, ep1, 40, ago=timedelta(seconds=2))  # due before the other tenant's
    [other] = await enqueue(runtime, second.id, ep2, 1)
    lanes = Lanes(per_tenant=4)

    def choose(found: list[Candidate]) -> list[Candidate]:  # these tenants' messages only (the database is shared)
        return lanes.choose([c for c in found if c.tenant_id in (first.id, second.id)])

    async with runtime.pool.acquire() as conn:
        claims, _ = await claim_due(conn, runtime.clock(), POLICY.lease, limit=100, choose=choose)
        # the first tenant's backlog up to its share, and the second tenant's message past it
        assert sum(c.tenant_id == first.id for c, _ in claims) == 4 and lanes.full_tenants() == [first.id]
        assert [c.id for c, _ in claims if c.tenant_id == second.id] == [other]
        await release_claims(conn, [c for c, _ in claims if c.tenant_id == second.id])
        lanes.release(second.id, ep2)
        more, _ = await claim_due(conn, runtime.clock(), POLICY.lease, limit=100, choose=choose,
                                  exclude_tenants=lanes.full_tenants(), order="newest")
        assert [c.id for c, _ in more] == [other] and more[0][0].tenant_id == second.id
        await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = ANY($1)", [ep1, ep2])


async def test_stopping_hands_back_claims_it_had_not_started(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    hook = f"https://{unique('slow-')}.example/hook"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook}, headers=tenant.auth)
    ep = r.json()["endpoint"]["id"]
    release = asyncio.Event()
    started: list[str] = []

    async def slow(request: httpx.Request) -> httpx.Response:
        started.append(request.headers["webhook-id"])
        await asyncio.wait_for(release.wait(), 2.5)  # inside the 3 s timeout
        return httpx.Response(204)

    web.handle(hook, slow)
    deliverer = make(runtime, web, Kek.from_env_value(kek_value), lanes=Lanes(per_endpoint=2, per_endpoint_waiting=6))
    task = asyncio.create_task(deliverer.run())
    await asyncio.sleep(0.3)  # listening
    ids = await enqueue(runtime, tenant.id, ep, 8)

    async def two_running() -> None:
        assert len(started) == 2 and deliverer.lanes.by_endpoint[ep] == 8

    await eventually(two_running, timeout=10.0)
    deliverer.stop()
    release.set()
    await asyncio.wait_for(task, 15)
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, state, attempts, locked_until FROM webhook_messages WHERE id = ANY($1)",
                                ids)
    done = {r["id"] for r in rows if r["state"] == "delivered"}
    assert done == set(started)
    handed_back = [r for r in rows if r["id"] not in done]
    assert handed_back and all(r["state"] == "pending" and r["attempts"] == 0 and r["locked_until"] is None
                               for r in handed_back)


class _PartitionRecorder(DeliveryClient):
    """A `DeliveryClient` that answers 204 itself and records each POST's partition."""

    def __init__(self) -> None:
        super().__init__(OutboundPolicy())
        self.partitions: dict[str, object] = {}

    async def post(self, url: str, body: bytes, *, headers: Mapping[str, str], timeout: float | None = None,
                   max_bytes: int | None = None, partition: Hashable = None) -> FetchResult:
        self.partitions[headers["webhook-id"]] = partition
        return FetchResult(final_url=url, status=204, headers={}, body=b"", redirect_chain=(url,), elapsed=0.0)


class _TenantsLanes(Lanes):
    """Claims only these tenants' messages (the database is shared with other tests)."""

    def __init__(self, tenants: set[str]) -> None:
        super().__init__()
        self.tenants = tenants

    def choose(self, found: list[Candidate]) -> list[Candidate]:
        return super().choose([c for c in found if c.tenant_id in self.tenants])


async def test_each_attempt_is_sent_in_its_tenants_partition_of_the_connections(
        console: AsyncTestClient[Any], runtime: Runtime, web: MockWeb, kek_value: str) -> None:
    from tests.integration.conftest import sign_up

    first, second = await sign_up(console), await sign_up(console)
    ep1 = await endpoint(console, first, web, [])
    ep2 = await endpoint(console, second, web, [])
    client = _PartitionRecorder()
    deliverer = Deliverer(runtime.settings.database_url, runtime.pool, sender=SafeSender(client),
                          kek=Kek.from_env_value(kek_value), policy=POLICY, clock=runtime.clock, idle_wake=30.0,
                          lanes=_TenantsLanes({first.id, second.id}))
    async with running(deliverer):
        ids1 = await enqueue(runtime, first.id, ep1, 3)
        ids2 = await enqueue(runtime, second.id, ep2, 2)

        async def all_sent() -> None:
            assert sorted(client.partitions) == sorted(ids1 + ids2)

        await eventually(all_sent, timeout=10.0)
    # A shared webhook host's connections are split by tenant (DeliveryClient's partitions).
    assert client.partitions == {**dict.fromkeys(ids1, first.id), **dict.fromkeys(ids2, second.id)}


async def test_a_stop_during_the_pause_between_two_passes_is_not_lost(
        runtime: Runtime, web: MockWeb, kek_value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wake-up that comes while the loop waits out its least time between passes (``TICK``) counts.

    The wake-up flag used to be cleared after that pause, so a `stop` during it was forgotten
    and the deliverer slept on until its next retry check (``idle_wake``, 30 s here). A stop
    also ends the pause itself (``TICK`` is 60 s here).
    """
    monkeypatch.setattr(deliverer_module, "TICK", 60.0)
    deliverer = make(runtime, web, Kek.from_env_value(kek_value), lanes=_TenantsLanes(set()))
    task = asyncio.create_task(deliverer.run())
    try:
        await asyncio.sleep(0.5)  # its first pass is done: it waits to be woken
        deliverer._wake.set()  # an attempt ended, say: the next pass waits until TICK after the last one
        await asyncio.sleep(0.5)  # inside that pause
        deliverer.stop()
        await asyncio.wait_for(asyncio.shield(task), 10)  # neither idle_wake's 30 s nor the pause's 60 s
    finally:
        deliverer.stop()
        if not task.done():
            task.cancel()


async def test_a_backlogged_endpoint_is_claimed_for_as_soon_as_half_its_share_is_free(
        console: AsyncTestClient[Any], tenant: TenantHandle, runtime: Runtime, web: MockWeb, kek_value: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Paced passes (``TICK`` apart) would feed an endpoint at most its share per pass: 40 messages at 4
    per pass, 30 s apart, would take minutes. An endpoint whose last claim took all its room is
    claimed for again once half its share is free, without waiting out the pace."""
    monkeypatch.setattr(deliverer_module, "TICK", 30.0)
    seen: list[str] = []
    ep = await endpoint(console, tenant, web, seen)
    deliverer = make(runtime, web, Kek.from_env_value(kek_value), batch=16,
                     lanes=Lanes(per_endpoint=2, per_endpoint_waiting=2))
    ids = await enqueue(runtime, tenant.id, ep, 40, ago=timedelta(seconds=1))
    async with running(deliverer):
        async def all_arrived() -> None:
            assert sorted(set(seen) & set(ids)) == sorted(ids)

        await eventually(all_arrived, timeout=15.0)
