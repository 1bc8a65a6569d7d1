"""Two replicas of everything behind HAProxy, exactly as ``make run REPLICAS=2`` starts them (#15 §2).

One stack for the module: ``python -m frontdoor_devstack.run`` with ``FRONTDOOR_REPLICAS=2``
on free ports, on the suite's embedded PostgreSQL and Redis (`start_servers`): two
replicas each of the console, the issuer and the ledger behind HAProxy (round robin,
health-checked on ``/readyz``), two of each of the dispatcher's delivery processes (read
from ``replicas.json``: whatever ``make run``'s process table replicates), one beat. A company
receiver in its own process (``bench/_receiver.py``) checks every perform webhook's
signature and counts them per operation; the agent is the benchmarks' (``bench/_common``).

Through the load balancer: confirms raced over both ledgers perform each operation once;
a SIGKILL of one replica of each kind mid-load loses no request the load balancer can
retry (GETs, and any request whose connection failed), no operation and no delivery; a
rolling restart (the supervisor's SIGHUP) under steady load shows no 5xx at all. Across
replicas, straight at each replica's port: a replayed ``jti`` or DPoP proof is refused by
the other issuer, and a confirm waiting on one ledger is woken by an outcome reported to
the other. Every wait is bounded (`eventually`); nothing times the system.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import secrets
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from frontdoor_devstack.load_balancer import LoadBalancer

from bench._common import CLIENT_ASSERTION_TYPE, FORM_HEADERS, JWT_BEARER, AgentHost, process_tree
from bench._common import Stack as BenchStack
from bench._receiver import ReceiverProcess
from bench.confirm_latency import OperationsAgent, configure
from tests.support.devstack import SERVICES, Devstack, replicated
from tests.support.eventually import eventually
from tests.support.fixed_windows import room_in_window
from tests.support.servers import Servers

TEST_TIMEOUT = 240.0
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(TEST_TIMEOUT, func_only=True)]

FAST_ENV = {
    # A perform whose ledger died is sent again soon: its lease ends a second after its timeout.
    "FRONTDOOR_WEBHOOK_RETRY_SCHEDULE": "0s,200ms,500ms,1s,1s,2s,2s,2s",
    "FRONTDOOR_WEBHOOK_TIMEOUT": "3s",
    "FRONTDOOR_WEBHOOK_LEASE_MARGIN": "1s",
    "FRONTDOOR_RELAY_RESEND_AFTER": "2",
    # Long enough that a confirm only answers in_progress if no outcome ever wakes it.
    "FRONTDOOR_CONFIRM_WAIT": "30s",
    "FRONTDOOR_LOG_LEVEL": "warning",
}


@dataclass
class Replicated:
    run: Devstack
    lb: LoadBalancer
    bench: BenchStack
    receiver: ReceiverProcess
    agent: OperationsAgent
    credential: str
    ports: dict[str, int]
    servers: Servers

    def public(self, service: str) -> str:
        return f"http://127.0.0.1:{self.ports[service]}"

    @property
    def slug(self) -> str:
        assert self.bench.tenant is not None
        return self.bench.tenant.slug

    def replicas(self) -> dict[str, dict[str, Any]]:
        return dict(json.loads((self.run.data_dir / "replicas.json").read_text()))

    def direct(self, replica: str) -> str:
        """A replica's own address, past the load balancer (its public base URL stays the LB's)."""
        return f"http://127.0.0.1:{self.replicas()[replica]['port']}"

    def served(self) -> dict[str, int]:
        """Requests each replica has been given by the load balancer so far."""
        return {name.split("/")[1]: int(row["stot"]) for name, row in self.lb.servers().items()}


@pytest.fixture(scope="module")
def rs() -> Iterator[Replicated]:
    with replicated("rep") as ground:
        servers, data_dir, ports = ground.servers, ground.data_dir, ground.ports
        receiver = ReceiverProcess(str(data_dir / "receiver.log"))
        host = AgentHost()
        try:
            run = ground.start({**FAST_ENV, "FRONTDOOR_OUTBOUND_ALLOWLIST": "127.0.0.1/32"})
            bench = BenchStack(root=data_dir / "bench", kek_value=ground.kek, database_url=servers.database_url,
                               redis_url=servers.redis_url, issuer_base_url=f"http://127.0.0.1:{ports['issuer']}",
                               agent_host=host)
            asyncio.run(bench.create_tenant(f"rep{secrets.token_hex(3)}"))
            agent = host.publish(OperationsAgent(host.base_url))
            credential = asyncio.run(configure(bench, receiver))
            yield Replicated(run, LoadBalancer(data_dir / "haproxy.sock"), bench, receiver, agent, credential, ports,
                             servers)
        finally:
            receiver.stop()
            host.stop()


# --------------------------------------------------------------------------- the agent's requests

class Client:
    """The agent's three requests (Session, the company's proposal, the confirm) and the company's read."""

    def __init__(self, rs: Replicated, http: httpx.AsyncClient) -> None:
        self.rs, self.http = rs, http
        assert rs.bench.tenant is not None
        self.issuer = rs.bench.tenant.issuer

    async def session(self, user: str, *, via: str | None = None) -> httpx.Response:
        body, headers = self.rs.agent.token_request(self.issuer, user)
        url = f"{via or self.rs.public('issuer')}/{self.rs.slug}/oauth/token"
        return await self.http.post(url, content=body, headers={**FORM_HEADERS, **headers})

    async def propose(self, session: dict[str, Any], user: str) -> httpx.Response:
        return await self.http.post(
            f"{self.rs.public('ledger')}/{self.rs.slug}/v1/operations",
            headers={"Authorization": f"Bearer {self.rs.credential}"},
            json={"kind": "bench.buy", "summary": f"Buy one item for {user}", "user_approval_required": True,
                  "caller": {"session_id": session["session_id"], "client_id": self.rs.agent.client_id,
                             "user_id": user}})

    async def confirm(self, op_id: str, access: str, *, via: str | None = None) -> httpx.Response:
        url = f"{self.rs.public('ledger')}/{self.rs.slug}/operations/{op_id}/confirm"  # the DPoP proof's htu
        sent_to = url if via is None else url.replace(self.rs.public("ledger"), via)
        headers = {"Authorization": f"DPoP {access}", "DPoP": self.rs.agent.dpop("POST", url, token=access),
                   "Content-Type": "application/json"}
        return await self.http.post(sent_to, headers=headers, content=b'{"revision":1,"approved_by":"user"}')

    async def read(self, op_id: str) -> httpx.Response:
        return await self.http.get(f"{self.rs.public('ledger')}/{self.rs.slug}/v1/operations/{op_id}",
                                   headers={"Authorization": f"Bearer {self.rs.credential}"})


def client(rs: Replicated) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64))


def performed(rs: Replicated) -> dict[str, set[str]]:
    """The receiver's perform webhooks: operation (idempotency key) -> the webhook-ids it came under."""
    by_key: dict[str, set[str]] = {}
    for msg_id, key, _at, sig_ok in rs.receiver.stats("perform", records=True)["records"]:
        assert sig_ok, "a perform webhook with a bad signature"
        if key is not None:
            by_key.setdefault(key, set()).add(msg_id)
    return by_key


async def wait_all_up(rs: Replicated) -> None:
    async def up() -> None:
        states = {name: row["status"] for name, row in rs.lb.servers().items()}
        assert len(states) == 2 * len(SERVICES) and all(s == "UP" for s in states.values()), states
    await eventually(up, timeout=120, interval=0.25)


# --------------------------------------------------------------------------- steady load

@dataclass
class Load:
    """Agents' journeys (Session, proposal, confirm, the company's read, the console's readiness)
    by ``workers`` concurrent clients until stopped. A 5xx is tallied and the request retried
    (the protocol's writes are idempotent: the confirm by revision, a Session request with a
    fresh ``jti``; a proposal retried may leave an unconfirmed orphan, never a lost one)."""

    rs: Replicated
    workers: int = 4
    statuses: collections.Counter[tuple[str, str, int]] = field(default_factory=collections.Counter)
    transport_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    confirmed: dict[str, str] = field(default_factory=dict)
    journeys: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def _send(self, label: str, method: str, send: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
        for _ in range(20):
            try:
                r = await send()
            except httpx.TransportError as exc:  # the load balancer cut the connection: status 0
                self.statuses[(label, method, 0)] += 1
                self.transport_errors[f"{label}: {type(exc).__name__} {exc}"[:160]] += 1
                await asyncio.sleep(0.2)
                continue
            self.statuses[(label, method, r.status_code)] += 1
            if r.status_code < 500:
                return r
            await asyncio.sleep(0.2)
        raise AssertionError(f"{label} kept failing: {self.statuses}")

    async def _journeys(self, http: httpx.AsyncClient, worker: int) -> None:
        c = Client(self.rs, http)
        n = 0
        while not self.stop.is_set():
            n += 1
            user = f"load-{worker}-{n}-{secrets.token_hex(2)}"
            r = await self._send("session", "POST", lambda u=user: c.session(u))
            assert r.status_code == 200, r.text
            session = r.json()
            r = await self._send("propose", "POST", lambda s=session, u=user: c.propose(s, u))
            assert r.status_code == 201, r.text
            op_id = r.json()["operation"]["operation_id"]
            r = await self._send("confirm", "POST", lambda o=op_id, s=session: c.confirm(o, s["access_token"]))
            assert r.status_code == 200, r.text
            self.confirmed[op_id] = r.json()["state"]
            r = await self._send("read", "GET", lambda o=op_id: c.read(o))
            assert r.status_code == 200, r.text
            r = await self._send("console", "GET", lambda: http.get(f"{self.rs.public('console')}/readyz"))
            assert r.status_code == 200, r.text
            self.journeys += 1

    async def run(self, during: Callable[[Load], Awaitable[None]]) -> None:
        async with client(self.rs) as http:
            tasks = [asyncio.create_task(self._journeys(http, w)) for w in range(self.workers)]
            try:
                await during(self)
            finally:
                self.stop.set()
                await asyncio.gather(*tasks)

    async def until_journeys(self, count: int, timeout: float = 120) -> None:
        async def enough() -> None:
            assert self.journeys >= count, f"{self.journeys} of {count} journeys ({dict(self.statuses)})"
        await eventually(enough, timeout=timeout, interval=0.1)

    def server_errors(self) -> dict[tuple[str, str, int], int]:
        return {k: n for k, n in self.statuses.items() if k[2] >= 500 or k[2] == 0}


async def all_performed_once(rs: Replicated, op_ids: set[str]) -> dict[str, set[str]]:
    async def arrived() -> dict[str, set[str]]:
        got = performed(rs)
        missing = op_ids - set(got)
        assert not missing, f"{len(missing)} of {len(op_ids)} confirmed operations not performed yet"
        return got
    got = await eventually(arrived, timeout=90, interval=0.25)
    twice = {k: v for k, v in got.items() if k in op_ids and len(v) > 1}
    assert not twice, f"performed under several webhook-ids: {twice}"
    return got


# --------------------------------------------------------------------------- the topology

def test_two_replicas_of_each_service_behind_the_load_balancer(rs: Replicated) -> None:
    replicas = rs.replicas()
    kinds = replicated_kinds(rs)
    assert set(SERVICES) < kinds, kinds  # and the dispatcher's delivery processes
    for kind in kinds:
        assert sorted(n for n, r in replicas.items() if r["kind"] == kind) == [f"{kind}-1", f"{kind}-2"]
    assert [n for n, r in replicas.items() if r["kind"] == "beat"] == ["beat"]
    asyncio.run(wait_all_up(rs))
    before = rs.served()
    for service in SERVICES:
        for _ in range(6):
            r = httpx.get(f"{rs.public(service)}/readyz")
            assert r.status_code == 200 and r.json()["checks"] == {"database": "ok", "redis": "ok"}
    after = rs.served()
    for service in SERVICES:  # round robin: both replicas answered
        assert all(after[f"{service}-{i}"] > before[f"{service}-{i}"] for i in (1, 2)), (before, after)
    # Every public URL is the load balancer's: the issuer's metadata names it.
    meta = httpx.get(f"{rs.public('issuer')}/.well-known/oauth-authorization-server/{rs.slug}").json()
    assert meta["issuer"] == f"{rs.public('issuer')}/{rs.slug}"
    assert f"issuer-1 127.0.0.1:{replicas['issuer-1']['port']}" in rs.run.text()


def test_beat_runs_once(rs: Replicated) -> None:
    """One beat process in the whole stack (the supervisor never multiplies it), not two."""
    beats = []
    for pid in process_tree(rs.run.proc.pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"celery" in b" ".join(cmd[:2]) and b"beat" in cmd:
            beats.append(pid)
    assert len(beats) == 1, beats
    assert beats == [rs.replicas()["beat"]["pid"]]


# --------------------------------------------------------------------------- state across replicas

def test_a_replayed_jti_or_dpop_proof_is_refused_by_the_other_issuer(rs: Replicated) -> None:
    """Replay caches live in Redis: what issuer-1 accepted, issuer-2 refuses (RFC 7523 §3, RFC 9449 §11.1)."""
    assert rs.bench.tenant is not None
    issuer = rs.bench.tenant.issuer
    one, two = rs.direct("issuer-1"), rs.direct("issuer-2")

    def form(client_assertion: str, assertion: str) -> tuple[bytes, dict[str, str]]:
        body = urlencode({"grant_type": JWT_BEARER, "client_assertion_type": CLIENT_ASSERTION_TYPE,
                          "client_assertion": client_assertion, "assertion": assertion}).encode()
        return body, {**FORM_HEADERS, "dpop": rs.agent.dpop("POST", f"{issuer}/oauth/token")}

    async def go() -> None:
        async with client(rs) as http:
            client_assertion, assertion = rs.agent.client_assertion(issuer), rs.agent.session_assertion(issuer, "u")
            body, headers = form(client_assertion, assertion)
            first = await http.post(f"{one}/{rs.slug}/oauth/token", content=body, headers=headers)
            assert first.status_code == 200, first.text
            # The client assertion's jti again (all else fresh), at the other replica.
            body, fresh = form(client_assertion, rs.agent.session_assertion(issuer, "u"))
            again = await http.post(f"{two}/{rs.slug}/oauth/token", content=body, headers=fresh)
            assert again.status_code == 401 and again.json()["error"] == "invalid_client", again.text
            # The Session assertion's jti again (all else fresh), at the other replica.
            body, fresh = form(rs.agent.client_assertion(issuer), assertion)
            again = await http.post(f"{two}/{rs.slug}/oauth/token", content=body, headers=fresh)
            assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text
            # The DPoP proof issuer-1 accepted (assertions fresh), at the other replica.
            body, _ = form(rs.agent.client_assertion(issuer), rs.agent.session_assertion(issuer, "u"))
            proof = await http.post(f"{two}/{rs.slug}/oauth/token", content=body, headers=headers)
            assert proof.status_code in (400, 401) and proof.json()["error"] == "invalid_dpop_proof", proof.text
            # All fresh, at the other replica: accepted (nothing else was refused).
            body, fresh = form(rs.agent.client_assertion(issuer), rs.agent.session_assertion(issuer, "u"))
            ok = await http.post(f"{two}/{rs.slug}/oauth/token", content=body, headers=fresh)
            assert ok.status_code == 200, ok.text

    asyncio.run(go())


async def _tenant_with_session_limit(rs: Replicated, limit: int) -> str:
    """Another tenant whose agents may start ``limit`` Sessions a minute; answers its slug."""
    from datetime import UTC, datetime

    import msgspec
    from frontdoor_core.db import create_pool
    from frontdoor_tenancy import issuer_settings, tenants
    from frontdoor_tenancy.credentials.key_encryption import Kek

    slug = f"replim{secrets.token_hex(3)}"
    pool = await create_pool(rs.bench.database_url, min_size=1, max_size=1)
    try:
        result = await tenants.sign_up(pool, tenants.SignUp(
            email=f"admin@{slug}.example", password=secrets.token_urlsafe(18), organization_name="Limited",
            slug=slug), kek=Kek.from_env_value(rs.bench.kek_value), now=datetime.now(UTC))
        async with pool.acquire() as conn:
            stored = await issuer_settings.get_settings(conn, result.tenant.id)
            changed = msgspec.structs.replace(stored.settings, sessions_per_agent_per_minute=limit,
                                              token_requests_per_network_per_minute=1_000_000)
            await issuer_settings.update_settings(conn, result.tenant.id, issuer_settings.validate_settings(
                changed, dev=True), if_version=stored.version)
    finally:
        await pool.close()
    return slug


def test_an_agents_session_limit_counts_across_both_issuers(rs: Replicated) -> None:
    """Rate limits are Redis counters: 3 Sessions a minute means 3 over both replicas, not 3 each."""
    limit, requests = 3, 8

    async def go() -> None:
        slug = await _tenant_with_session_limit(rs, limit)
        issuer = f"{rs.public('issuer')}/{slug}"
        async with client(rs) as http:
            # All in one minute (the window): a run across two would find the first one's count in the second.
            await room_in_window(60, needed_s=20)
            answers: list[tuple[str, httpx.Response]] = []
            for n in range(requests):
                replica = f"issuer-{1 + n % 2}"
                body, headers = rs.agent.token_request(issuer, f"limited-user-{n}")
                answers.append((replica, await http.post(f"{rs.direct(replica)}/{slug}/oauth/token",
                                                         content=body, headers=headers)))
            ok = [r for _, r in answers if r.status_code == 200]
            refused = [(name, r) for name, r in answers if r.status_code != 200]
            assert len(ok) == limit, [(n, r.status_code, r.text[:80]) for n, r in answers]
            assert all(r.status_code == 429 and r.json()["error"] == "rate_limited" for _, r in refused), refused
            assert {name for name, _ in refused} == {"issuer-1", "issuer-2"}

    asyncio.run(go())


def test_a_confirm_waiting_on_one_ledger_is_woken_by_an_outcome_reported_to_the_other(rs: Replicated) -> None:
    """The company answers the perform 202 (outcome later) and reports it to ledger-2: ledger-1's
    waiting confirm answers ``succeeded`` (the settled channel is Redis pub/sub, not process memory)."""
    rs.receiver.control("perform", status=202, body="{}")
    try:
        async def go() -> None:
            async with client(rs) as http:
                c = Client(rs, http)
                session = (await c.session("woken-user")).json()
                op_id = (await c.propose(session, "woken-user")).json()["operation"]["operation_id"]
                confirm = asyncio.create_task(c.confirm(op_id, session["access_token"], via=rs.direct("ledger-1")))

                async def webhook_arrived() -> None:
                    assert op_id in performed(rs)
                await eventually(webhook_arrived, timeout=30)
                assert not confirm.done(), "the confirm answered before any outcome was reported"
                reported = await http.post(f"{rs.direct('ledger-2')}/{rs.slug}/v1/operations/{op_id}/outcome",
                                           headers={"Authorization": f"Bearer {rs.credential}"},
                                           json={"outcome": "succeeded", "result": {"summary": "Done later"}})
                assert reported.status_code == 200, reported.text
                answer = await confirm
                assert answer.status_code == 200, answer.text
                assert answer.json()["state"] == "succeeded", answer.json()
        asyncio.run(go())
    finally:
        rs.receiver.control("perform", status=200, body='{"outcome":"succeeded","result":{"summary":"Done"}}')


# --------------------------------------------------------------------------- exactly once

def test_racing_confirms_over_both_ledgers_perform_each_operation_once(rs: Replicated) -> None:
    """100 operations, each confirmed by 10 concurrent requests through the load balancer."""
    operations, racers = 100, 10

    async def go() -> None:
        async with client(rs) as http:
            c = Client(rs, http)
            prepared = []
            for u in range(10):
                session = (await c.session(f"race-user-{u}")).json()
                for _ in range(operations // 10):
                    r = await c.propose(session, f"race-user-{u}")
                    assert r.status_code == 201, r.text
                    prepared.append((r.json()["operation"]["operation_id"], session["access_token"]))
            before = rs.served()
            statuses: collections.Counter[int] = collections.Counter()
            batch = asyncio.Semaphore(4)  # 4 operations (40 confirms) at a time

            async def race(op_id: str, access: str) -> None:
                async with batch:
                    answers = await asyncio.gather(*(c.confirm(op_id, access) for _ in range(racers)))
                statuses.update(a.status_code for a in answers)

            await asyncio.gather(*(race(*p) for p in prepared))
            assert all(s < 500 for s in statuses), statuses
            assert statuses[200] >= operations, statuses
            after = rs.served()
            spread = {f"ledger-{i}": after[f"ledger-{i}"] - before[f"ledger-{i}"] for i in (1, 2)}
            assert all(n >= operations for n in spread.values()), spread  # both ledgers confirmed
            ids = {op for op, _ in prepared}
            await all_performed_once(rs, ids)
            for op_id in list(ids)[:10]:
                state = (await c.read(op_id)).json()["operation"]["state"]
                assert state == "succeeded", state

    asyncio.run(go())


# --------------------------------------------------------------------------- faults under load

def replicated_kinds(rs: Replicated) -> set[str]:
    """The kinds of process that run twice (the HTTP services and the dispatcher's delivery processes)."""
    return {r["kind"] for name, r in rs.replicas().items() if name.endswith("-2")}


def _kill(rs: Replicated, name: str) -> int:
    pid = int(rs.replicas()[name]["pid"])
    os.killpg(pid, signal.SIGKILL)
    return pid


def test_sigkill_of_one_replica_of_each_kind_under_load_loses_nothing(rs: Replicated) -> None:
    asyncio.run(wait_all_up(rs))
    killed: dict[str, int] = {}

    async def during(load: Load) -> None:
        await load.until_journeys(8)
        for kind in sorted(replicated_kinds(rs)):  # console, issuer, ledger and the delivery processes
            killed[f"{kind}-1"] = _kill(rs, f"{kind}-1")
        start = load.journeys
        await load.until_journeys(start + 16)  # carrying on on the other replicas
        await wait_all_up(rs)  # the supervisor started the killed ones again

    load = Load(rs)
    asyncio.run(load.run(during))
    for name, pid in killed.items():
        assert rs.replicas()[name]["pid"] != pid, f"{name} was not started again"
    errors = load.server_errors()
    # The load balancer retried every GET and every connection that failed; only a POST that a
    # dying replica had already taken could come back 502, and its retry went through.
    assert not {k: n for k, n in errors.items() if k[1] == "GET"}, errors
    assert all(k[2] in (502, 0) for k in errors), (errors, load.transport_errors)
    posts_in_flight = len(killed) * load.workers
    assert sum(errors.values()) <= posts_in_flight, errors
    assert all(state in ("succeeded", "in_progress") for state in load.confirmed.values()), load.confirmed
    # Every confirmed operation is performed once, the ones whose ledger died mid-perform too.
    asyncio.run(all_performed_once(rs, set(load.confirmed)))
    print(f"\nSIGKILL under load: {load.journeys} journeys, {dict(load.statuses)}, cut: {dict(load.transport_errors)}")


def test_a_rolling_restart_under_steady_load_shows_no_5xx(rs: Replicated) -> None:
    asyncio.run(wait_all_up(rs))
    pids = {name: r["pid"] for name, r in rs.replicas().items()}
    done_before = rs.run.text().count("Rolling restart done.")

    async def during(load: Load) -> None:
        await load.until_journeys(4)
        rs.run.proc.send_signal(signal.SIGHUP)

        async def restarted() -> None:
            assert rs.run.text().count("Rolling restart done.") > done_before, rs.run.text()[-1500:]
        await eventually(restarted, timeout=200, interval=0.25)
        start = load.journeys
        await load.until_journeys(start + 4)

    load = Load(rs)
    asyncio.run(load.run(during))
    now = rs.replicas()
    assert all(now[name]["pid"] != pid for name, pid in pids.items()), (pids, now)  # every process restarted
    assert load.server_errors() == {}, dict(load.statuses)
    asyncio.run(all_performed_once(rs, set(load.confirmed)))
    print(f"\nrolling restart under load: {load.journeys} journeys, {dict(load.statuses)}")
    test_beat_runs_once(rs)  # still one beat after its restart
