"""The ledger and the webhook path under faults, with real processes over real sockets.

One stack for the module: embedded PostgreSQL and Redis, the issuer and TWO ledger
processes under granian (replicas without a proxy: both answer for the same public URL,
the client spreads its requests across their ports), the deliverer (``python -m
frontdoor_dispatcher.deliverer``) and a company receiver in its own process (``bench/_receiver.py``)
that checks every signature and counts deliveries per webhook-id and performs per
idempotency key. Timings are short so faults heal fast: retries ``0s,200ms,500ms,1s,1s,2s``,
a 1 s delivery timeout, a 1 s lease margin.

No time is asserted except the bound stated in the dead-endpoint case (generous, it is a
property of the design: another tenant's deliveries never wait for a dead endpoint's
timeouts). Every other wait is a liveness bound taken from one per-test `Budget` that ends
before pytest-timeout would, so a slow or stuck recovery on a loaded machine fails with how
many messages arrived out of how many, instead of a stack dump; the fast path returns as
soon as everything has arrived, and the outages last until they are observed (the ledgers'
``/readyz`` says so), never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bench import _dispatch
from bench._common import Stack, Tenant
from bench._receiver import ReceiverProcess
from bench.confirm_latency import OperationsAgent

TEST_TIMEOUT = 300.0
"""pytest-timeout for each test, its body only: the module's stack starts in the fixture."""
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(TEST_TIMEOUT, func_only=True)]

FAST_ENV = {
    "FRONTDOOR_WEBHOOK_RETRY_SCHEDULE": "0s,200ms,500ms,1s,1s,2s",
    "FRONTDOOR_WEBHOOK_TIMEOUT": "1s",
    "FRONTDOOR_WEBHOOK_LEASE_MARGIN": "1s",
    "FRONTDOOR_LOG_LEVEL": "warning",
}
DEAD_ENDPOINT_BOUND = 3.0
"""Seconds another tenant's delivery may take while a dead endpoint's attempts time out, on
top of twice the same delivery's time measured just before (what the machine's load costs)."""


@dataclass
class Pipeline:
    stack: Stack
    tenant: Tenant
    receiver: ReceiverProcess
    agent: OperationsAgent
    ledgers: list[_dispatch.Service]
    deliverer: _dispatch.Service
    env: dict[str, str]

    @property
    def public_ledger(self) -> str:
        return self.ledgers[0].base_url  # type: ignore[attr-defined,no-any-return]

    def run(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pipe() -> Iterator[Pipeline]:
    with Stack() as stack:
        receiver = ReceiverProcess(str(stack.root / "receiver.log"))
        stack._stack.callback(receiver.stop)
        tenant = asyncio.run(stack.create_tenant("e2e"))
        agent = stack.agent_host.publish(OperationsAgent(stack.agent_host.base_url))  # type: ignore[union-attr]
        public = f"http://127.0.0.1:{_dispatch.free_port()}"
        env = _dispatch.service_env(stack, {**FAST_ENV, "FRONTDOOR_LEDGER_BASE_URL": public})
        ledgers = [_dispatch.granian_app(stack, "ledger-a", "frontdoor_ledger.asgi:app", env,
                                         port=int(public.rsplit(":", 1)[1])),
                   _dispatch.granian_app(stack, "ledger-b", "frontdoor_ledger.asgi:app", env)]
        deliverer = _dispatch.deliverer(stack, {**env, "FRONTDOOR_LOG_LEVEL": "info"})  # logs "deliverer_started"
        # Start everything at once (each waits for itself below): the module's wall time.
        stack.start_issuer(extra_env=FAST_ENV)
        for svc in (*ledgers, deliverer):
            svc.start()
        for svc in ledgers:
            _dispatch.wait_http(svc)
        deliverer.wait_for_log("deliverer_started", 60)
        yield Pipeline(stack, tenant, receiver, agent, ledgers, deliverer, env)


class Budget:
    """One deadline for a whole test, ``margin`` seconds before pytest-timeout's.

    Each wait takes what is left, so the waits of one test never add up past the timeout
    (on a loaded 2-core machine a reconnection alone can take tens of seconds), and the
    first one to run out fails with its counts.
    """

    def __init__(self, margin: float = 20.0) -> None:
        self.deadline = time.monotonic() + TEST_TIMEOUT - margin

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


async def eventually(check: Callable[[], Any], within: float | Budget, what: str, step: float = 0.1,
                     progress: Callable[[], str] | None = None) -> Any:
    """Poll ``check`` until it is true; on timeout say ``what`` and, if given, ``progress()``."""
    limit = within.left() if isinstance(within, Budget) else within
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f" ({progress()})" if progress is not None else ""
            raise AssertionError(f"not within {limit:.0f} s: {what}{seen}")
        await asyncio.sleep(step)


def arrived(pipe: Pipeline, name: str, expected: int) -> Callable[[], str]:
    """``progress`` for `eventually`: how many distinct messages the receiver got, of how many."""
    def say() -> str:
        stats = pipe.receiver.stats(name)
        return f"{stats['distinct_ids']} of {expected} messages arrived, {stats['raw']} deliveries"
    return say


async def db(pipe: Pipeline) -> Any:
    from frontdoor_core.db import create_pool

    return await create_pool(pipe.stack.database_url, min_size=1, max_size=2)


def endpoint(pipe: Pipeline, name: str, *, port: int | None = None, tenant_id: str | None = None,
             event_types: tuple[str, ...] = ("operation.succeeded",), **conf: Any) -> str:
    ep, secret = asyncio.run(_dispatch.add_endpoint(pipe.stack, pipe.receiver.hook_url(name, port),
                                                    tenant_id=tenant_id or pipe.tenant.id, event_types=event_types))
    pipe.receiver.control(name, secret=secret, **{"body": "{}", **conf})
    return ep


async def enqueue_keyed(pool: Any, tenant_id: str, endpoint_id: str, count: int, prefix: str) -> list[str]:
    """Event messages carrying an idempotency key each, as a perform webhook does."""
    from datetime import UTC, datetime

    from frontdoor_webhooks.messages import enqueue_message

    async with pool.acquire() as conn, conn.transaction():
        return [await enqueue_message(conn, tenant_id, endpoint_id, "operation.succeeded",
                                      {"idempotency_key": f"{prefix}-{i}"}, purpose="event", now=datetime.now(UTC))
                for i in range(count)]


async def all_delivered(pool: Any, ids: list[str], within: float | Budget = 20.0) -> dict[str, int]:
    """Wait until PostgreSQL records every message delivered (an attempt the receiver got but a
    crash or outage kept from being recorded goes again once its lease ends); the final states."""
    deadline = time.monotonic() + (within.left() if isinstance(within, Budget) else within)
    while (states := await _dispatch.message_states(pool, ids)) != {"delivered": len(ids)}:
        if time.monotonic() > deadline:
            return states
        await asyncio.sleep(0.2)
    return states


def assert_at_least_once(stats: dict[str, Any], expected_ids: set[str], keys: int | None = None) -> None:
    received = {r[0] for r in stats["records"]}
    assert received == expected_ids, (f"{len(received & expected_ids)} of {len(expected_ids)} messages arrived: "
                                      f"missing {len(expected_ids - received)}, unexpected {len(received - expected_ids)}")
    assert stats["bad_signatures"] == 0
    assert stats["keys_with_several_ids"] == []  # a duplicate always carries the same webhook-id
    if keys is not None:
        assert stats["performs"] == keys


# --------------------------------------------------------------------------- (a)

def test_concurrent_confirms_across_two_ledgers_perform_each_operation_once(pipe: Pipeline) -> None:
    from datetime import UTC, datetime

    from frontdoor_core.db import create_pool
    from frontdoor_operations.kinds import KindInput, put_kind
    from frontdoor_tenancy.actor import Actor

    ep = endpoint(pipe, "perform", event_types=(), body='{"outcome":"succeeded","result":{"summary":"Done"}}')

    async def kind() -> None:
        pool = await create_pool(pipe.stack.database_url, min_size=1, max_size=1)
        async with pool.acquire() as conn, conn.transaction():
            await put_kind(conn, Actor(tenant_id=pipe.tenant.id, type="system"), "e2e.buy",
                           KindInput(perform_endpoint_id=ep), now=datetime.now(UTC))
        await pool.close()

    asyncio.run(kind())
    credential = asyncio.run(pipe.stack.resource_credential())
    ops, per_op = 100, 10
    slug, issuer, public = pipe.tenant.slug, pipe.tenant.issuer, pipe.public_ledger
    ports = [svc.base_url for svc in pipe.ledgers]  # type: ignore[attr-defined]

    async def go() -> tuple[list[tuple[str, list[httpx.Response]]], dict[str, Any]]:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as http:
            async def prepare(i: int) -> tuple[str, str]:
                body, headers = pipe.agent.token_request(issuer, f"e2e-user-{i}")
                token = (await http.post(f"{issuer}/oauth/token", content=body, headers=headers)).json()
                r = await http.post(f"{ports[i % 2]}/{slug}/v1/operations", headers={
                    "Authorization": f"Bearer {credential}"}, json={
                    "kind": "e2e.buy", "summary": f"Buy item {i}", "user_approval_required": True,
                    "caller": {"session_id": token["session_id"], "client_id": pipe.agent.client_id,
                               "user_id": f"e2e-user-{i}"}})
                assert r.status_code in (200, 201), r.text
                return r.json()["operation"]["operation_id"], token["access_token"]

            sem = asyncio.Semaphore(10)

            async def limited_prepare(i: int) -> tuple[str, str]:
                async with sem:
                    return await prepare(i)

            prepared = await asyncio.gather(*(limited_prepare(i) for i in range(ops)))

            async def confirm_all(op_id: str, access: str) -> tuple[str, list[httpx.Response]]:
                path = f"/{slug}/operations/{op_id}/confirm"
                async with sem:
                    answers = await asyncio.gather(*(http.post(
                        ports[n % 2] + path, content=b'{"revision":1,"approved_by":"user"}', headers={
                            "Authorization": f"DPoP {access}", "Content-Type": "application/json",
                            "DPoP": pipe.agent.dpop("POST", public + path, token=access)}) for n in range(per_op)))
                return op_id, list(answers)

            results = await asyncio.gather(*(confirm_all(op_id, access) for op_id, access in prepared))
            finals = {}
            for op_id, access in prepared:
                path = f"/{slug}/operations/{op_id}"
                r = await http.get(public + path, headers={"Authorization": f"DPoP {access}",
                                                           "DPoP": pipe.agent.dpop("GET", public + path, token=access)})
                finals[op_id] = r.json()["state"]
        return results, finals

    results, finals = asyncio.run(go())
    for op_id, answers in results:
        assert all(a.status_code == 200 for a in answers), [(a.status_code, a.text[:200]) for a in answers]
        bodies = [a.json() for a in answers]
        assert {b["operation_id"] for b in bodies} == {op_id}
        assert {b["revision"] for b in bodies} == {1}
        assert {b["state"] for b in bodies} <= {"in_progress", "succeeded"}, bodies
    assert set(finals.values()) == {"succeeded"}, finals
    stats = pipe.receiver.stats("perform", records=True)
    assert stats["performs"] == ops  # each operation performed exactly once...
    assert stats["raw"] == ops  # ...by exactly one delivery
    assert {r[1] for r in stats["records"]} == set(finals)
    assert stats["bad_signatures"] == 0


# --------------------------------------------------------------------------- (b)

def test_deliverer_killed_mid_delivery_loses_nothing_and_duplicates_keep_their_webhook_id(pipe: Pipeline) -> None:
    ep = endpoint(pipe, "kill", delay=0.3)
    count = 300
    budget = Budget()

    async def go() -> dict[str, int]:
        pool = await db(pipe)
        try:
            ids = await enqueue_keyed(pool, pipe.tenant.id, ep, count, "kill")
            await eventually(lambda: pipe.receiver.stats("kill")["raw"] >= 60, budget, "deliveries under way",
                             progress=arrived(pipe, "kill", count))
            pipe.deliverer.kill()  # SIGKILL, attempts in flight and claims held
            assert pipe.receiver.stats("kill")["distinct_ids"] < count, "the kill came too late to mean anything"
            since = pipe.deliverer.log_size()
            pipe.deliverer.start()
            pipe.deliverer.wait_for_log("deliverer_started", budget.left(), since=since)
            await eventually(lambda: pipe.receiver.stats("kill")["distinct_ids"] >= count, budget, "every message",
                             progress=arrived(pipe, "kill", count))
            states = await all_delivered(pool, ids, within=budget)
        finally:
            await pool.close()
        assert_at_least_once(pipe.receiver.stats("kill", records=True), set(ids), keys=count)
        return states

    states = asyncio.run(go())
    assert states == {"delivered": count}


# --------------------------------------------------------------------------- (c)

def test_receiver_down_then_up_gets_every_message_after_recovery(pipe: Pipeline) -> None:
    port = pipe.receiver.open_port()
    ep = endpoint(pipe, "flaky", port=port)
    pipe.receiver.close_port(port)

    async def go() -> dict[str, int]:
        pool = await db(pipe)
        try:
            ids = await enqueue_keyed(pool, pipe.tenant.id, ep, 20, "flaky")

            async def failed_attempts() -> int:
                return int(await pool.fetchval(
                    "SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1 AND error_class = 'connect'", ep))

            budget = Budget()
            deadline = time.monotonic() + budget.left()
            while (failed := await failed_attempts()) < 20 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert failed >= 20, f"{failed} of 20 refused attempts"  # the receiver really was down for every message
            assert pipe.receiver.stats("flaky")["raw"] == 0
            pipe.receiver.open_port(port)
            await eventually(lambda: pipe.receiver.stats("flaky")["distinct_ids"] >= 20, budget,
                             "delivery after recovery", progress=arrived(pipe, "flaky", 20))
            states = await all_delivered(pool, ids, within=budget)
        finally:
            await pool.close()
        assert_at_least_once(pipe.receiver.stats("flaky", records=True), set(ids), keys=20)
        return states

    assert asyncio.run(go()) == {"delivered": 20}


# --------------------------------------------------------------------------- (d)

def test_a_dead_endpoint_does_not_delay_another_tenants_deliveries(pipe: Pipeline) -> None:
    other = asyncio.run(pipe.stack.create_tenant("e2e-other"))
    dead = endpoint(pipe, "dead", delay=30.0)  # answers long after the 1 s timeout
    fast = endpoint(pipe, "fast", tenant_id=other.id)
    budget = Budget()

    async def go() -> tuple[float, float, list[float], int]:
        pool = await db(pipe)
        sent = 0

        async def round_trip(label: str, within: float) -> float:
            nonlocal sent
            t0 = time.monotonic()
            sent += len(await enqueue_keyed(pool, other.id, fast, 10, f"fast-{label}"))
            await eventually(lambda n=sent: pipe.receiver.stats("fast")["distinct_ids"] >= n,
                             min(within, budget.left()), f"the other tenant's deliveries ({label})",
                             progress=arrived(pipe, "fast", sent))
            return time.monotonic() - t0

        try:
            # The same round trip with no dead endpoint: what this machine takes right now.
            baseline = await round_trip("baseline", budget.left())
            bound = DEAD_ENDPOINT_BOUND + 2 * baseline
            # The dead endpoint's messages go first: they are due before the others'.
            await enqueue_keyed(pool, pipe.tenant.id, dead, 300, "dead")
            await eventually(lambda: pipe.receiver.stats("dead")["raw"] > 0, budget, "the dead endpoint is being tried")
            lags = []
            for round_no in range(5):
                lags.append(await round_trip(str(round_no), bound * 3))
            # The dead endpoint's attempts time out after 1 s each; on a quiet machine the five rounds can
            # finish before the first of them is recorded, so wait for it (bounded) rather than sample once.
            timeouts = 0
            until = time.monotonic() + min(15.0, budget.left())
            while timeouts == 0 and time.monotonic() < until:
                timeouts = int(await pool.fetchval(
                    "SELECT count(*) FROM webhook_attempts WHERE endpoint_id = $1 AND error_class = 'timeout'", dead))
                if timeouts == 0:
                    await asyncio.sleep(0.2)
        finally:
            await pool.close()
            pipe.receiver.control("dead", delay=0.0)  # let it recover for the next cases
        return baseline, bound, lags, timeouts

    baseline, bound, lags, timeouts = asyncio.run(go())
    assert timeouts > 0  # the dead endpoint's attempts were being made (and counted) meanwhile
    # Waiting for the dead endpoint's timeouts would take tens of seconds (300 x 1 s); a loaded
    # machine only stretches the baseline, which the bound includes.
    assert max(lags) < bound, f"lags {lags}, baseline {baseline:.2f} s, bound {bound:.2f} s"


# --------------------------------------------------------------------------- (e) and (f)

#: Messages before the outage, and written during (e) or after (f) it. The endpoint gets at
#: most 16 attempts at once (a 300 ms receiver: ~50/s), so the first batch is still being
#: delivered when the outage starts (checked), and the whole test stays small.
FIRST, SECOND = 120, 40


async def ledgers_ready(pipe: Pipeline, http: httpx.AsyncClient) -> list[bool]:
    """Each ledger's ``/readyz`` (PostgreSQL and Redis answer): what a load balancer would see."""
    answers = []
    for svc in pipe.ledgers:
        try:
            r = await http.get(f"{svc.base_url}/readyz")  # type: ignore[attr-defined]
            answers.append(r.status_code == 200)
        except httpx.HTTPError:
            answers.append(False)
    return answers


async def until_ledgers(pipe: Pipeline, ready: bool, budget: Budget, what: str) -> None:
    """Wait until every ledger reports ``ready`` (or every one reports not ready)."""
    async with httpx.AsyncClient(timeout=5) as http:
        deadline = time.monotonic() + budget.left()
        while (seen := await ledgers_ready(pipe, http)) != [ready] * len(pipe.ledgers):
            assert time.monotonic() < deadline, f"{what}: /readyz of the ledgers {seen}"
            await asyncio.sleep(0.2)


def test_redis_restarted_mid_stream_loses_nothing(pipe: Pipeline) -> None:
    ep = endpoint(pipe, "redis", delay=0.3)
    redis = pipe.stack._redis
    budget = Budget()
    total = FIRST + SECOND

    async def go() -> dict[str, int]:
        pool = await db(pipe)
        try:
            ids = await enqueue_keyed(pool, pipe.tenant.id, ep, FIRST, "redis-a")
            await eventually(lambda: pipe.receiver.stats("redis")["raw"] >= 20, budget, "deliveries under way",
                             progress=arrived(pipe, "redis", FIRST))
            redis.stop()  # non-durable: every queued task is gone
            assert pipe.receiver.stats("redis")["distinct_ids"] < FIRST, "Redis stopped too late to mean anything"
            await until_ledgers(pipe, False, budget, "the outage was never seen")
            ids += await enqueue_keyed(pool, pipe.tenant.id, ep, SECOND, "redis-b")  # written while Redis is down
            redis.start()
            await eventually(lambda: pipe.receiver.stats("redis")["distinct_ids"] >= total, budget,
                             "every message after the restart", progress=arrived(pipe, "redis", total))
            # An attempt the receiver got but whose result was lost goes again once its lease ends.
            states = await all_delivered(pool, ids, within=budget)
        finally:
            await pool.close()
        assert_at_least_once(pipe.receiver.stats("redis", records=True), set(ids), keys=total)
        return states

    assert asyncio.run(go()) == {"delivered": total}
    assert pipe.deliverer.alive()


def test_postgres_restarted_under_load_services_recover_by_themselves(pipe: Pipeline) -> None:
    ep = endpoint(pipe, "pg", delay=0.3)
    pg = pipe.stack._pg
    budget = Budget()
    total = FIRST + SECOND

    async def go() -> dict[str, int]:
        pool = await db(pipe)
        ids = await enqueue_keyed(pool, pipe.tenant.id, ep, FIRST, "pg-a")
        await pool.close()
        await eventually(lambda: pipe.receiver.stats("pg")["raw"] >= 20, budget, "deliveries under way",
                         progress=arrived(pipe, "pg", FIRST))
        pg.stop()  # fast shutdown: every connection of every service is cut
        assert pipe.receiver.stats("pg")["distinct_ids"] < FIRST, "PostgreSQL stopped too late to mean anything"
        await until_ledgers(pipe, False, budget, "the outage was never seen")
        pg.start()
        await until_ledgers(pipe, True, budget, "the ledgers did not recover")
        pool = await db(pipe)
        try:
            ids += await enqueue_keyed(pool, pipe.tenant.id, ep, SECOND, "pg-b")  # after the restart
            await eventually(lambda: pipe.receiver.stats("pg")["distinct_ids"] >= total, budget,
                             "every message after the restart", progress=arrived(pipe, "pg", total))
            # An attempt whose result could not be written while PostgreSQL was down goes again
            # once its lease ends.
            states = await all_delivered(pool, ids, within=budget)
        finally:
            await pool.close()
        assert_at_least_once(pipe.receiver.stats("pg", records=True), set(ids), keys=total)
        return states

    assert asyncio.run(go()) == {"delivered": total}
    assert all(svc.alive() for svc in (*pipe.ledgers, pipe.deliverer))
