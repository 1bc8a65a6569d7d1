"""``FRONTDOOR_DB_POOL_INIT`` (issue #13 §4): a service process opens that many PostgreSQL
connections at start-up, before it serves, so a process restarted under load does not open
them one request at a time under its first burst; capped at ``FRONTDOOR_DB_POOL_MAX``; best
effort (a connection PostgreSQL refuses does not fail the start). Checked at PostgreSQL:
the backends a started runtime hands out existed before anything asked for them."""

from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import AsyncExitStack
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import msgspec
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings

from tests.integration.console.test_log_redaction import capture_logs
from tests.support.devstack import free_port
from tests.support.dns_server import LocalDNS
from tests.support.eventually import eventually
from tests.support.granian_app import GranianApp, service_env
from tests.support.servers import Servers


async def _backends_started_before(runtime: Runtime, count: int) -> tuple[set[int], datetime, dict[int, datetime]]:
    """Hold `count` connections at once (no more can be idle) and read when PostgreSQL started each backend."""
    async with AsyncExitStack() as held:
        mark = await asyncpg.connect(runtime.settings.database_url)
        try:
            now = await mark.fetchval("SELECT clock_timestamp()")  # after the start-up, before any acquire
            conns = [await held.enter_async_context(runtime.pool.acquire(timeout=5)) for _ in range(count)]
            pids = {c.get_server_pid() for c in conns}
            rows = await mark.fetch("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = any($1::int[])", list(pids))
        finally:
            await mark.close()
    return pids, now, {r["pid"]: r["backend_start"] for r in rows}


async def test_the_runtime_opens_db_pool_init_connections_before_it_is_handed_out(settings: Settings, migrated: str) -> None:
    rt = await Runtime.open(msgspec.structs.replace(settings, db_pool_min=1, db_pool_max=5, db_pool_init=4))
    try:
        assert (rt.pool.get_size(), rt.pool.get_idle_size(), rt.pool.get_min_size()) == (4, 4, 1)
        pids, now, started = await _backends_started_before(rt, 4)
        assert len(pids) == 4 and set(started) == pids
        assert all(at < now for at in started.values()), (now, started)  # none opened on demand
    finally:
        await rt.close()


async def test_zero_opens_only_the_minimum_and_init_is_capped_at_the_maximum(settings: Settings, migrated: str) -> None:
    rt = await Runtime.open(msgspec.structs.replace(settings, db_pool_min=2, db_pool_max=6, db_pool_init=0))
    try:
        assert rt.pool.get_size() == 2
        _, now, started = await _backends_started_before(rt, 3)
        assert sum(at > now for at in started.values()) == 1  # the third is opened when asked for
    finally:
        await rt.close()
    rt = await Runtime.open(msgspec.structs.replace(settings, db_pool_min=1, db_pool_max=3, db_pool_init=50))
    try:
        assert (rt.pool.get_size(), rt.pool.get_max_size()) == (3, 3)
    finally:
        await rt.close()


async def test_a_connection_postgresql_refuses_does_not_fail_the_start(settings: Settings, migrated: str) -> None:
    """A role allowed 2 connections: the runtime starts with 2 of the 4 asked, logs it, serves."""
    role = f"fd_pool_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(migrated)
    try:
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pool-init' CONNECTION LIMIT 2")
        parts = urlsplit(migrated)
        host = parts.netloc.rsplit("@", 1)[-1]
        dsn = urlunsplit((parts.scheme, f"{role}:pool-init@{host}", parts.path, parts.query, ""))
        with capture_logs() as logs:
            rt = await Runtime.open(msgspec.structs.replace(settings, database_url=dsn, db_pool_min=1, db_pool_max=4,
                                                            db_pool_init=4))
        try:
            assert rt.pool.get_size() == 2
            assert await rt.pool.fetchval("SELECT 1") == 1
            events = [json.loads(line) for line in logs.getvalue().splitlines() if line.startswith("{")]
            partial = [e for e in events if e.get("event") == "db_pool_init_partial"]
            assert len(partial) == 1 and (partial[0]["wanted"], partial[0]["opened"]) == (4, 2), events
        finally:
            await rt.close()
    finally:
        await asyncio.sleep(0)
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


async def test_a_ledger_under_granian_has_them_open_once_readyz_answers(servers: Servers, dns: LocalDNS,
                                                                      kek_value: str) -> None:
    """At the wire, as the image starts it: /readyz 200, then the pool's first sample reads them open."""
    port = free_port()
    env = service_env(servers, dns, kek_value, FRONTDOOR_LEDGER_WORKERS="1", FRONTDOOR_METRICS_PORT=str(port),
                      FRONTDOOR_DB_POOL_MIN="1", FRONTDOOR_DB_POOL_MAX="6", FRONTDOOR_DB_POOL_INIT="5")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    app = GranianApp("frontdoor_ledger.asgi:app", env, launcher="frontdoor_ledger.serve")
    try:
        await app.ready()

        async def sampled() -> None:
            async with httpx.AsyncClient(timeout=5) as http:
                try:
                    r = await http.get(f"http://127.0.0.1:{port}/metrics")
                except httpx.HTTPError as exc:
                    raise AssertionError(str(exc)) from None
            opened = [line for line in r.text.splitlines() if line.startswith("frontdoor_db_pool_connections{")
                      and 'service="ledger"' in line and 'state="open"' in line]
            assert opened and float(opened[0].rsplit(" ", 1)[1]) == 5, (opened, app.output())

        await eventually(sampled, timeout=30, interval=0.3)  # sampled once as the lifespan starts
    finally:
        app.close()
