"""Two deliverers (replicas) over real PostgreSQL and real loopback sockets: a tenant's dead
endpoint (every attempt waits for the timeout) does not delay another tenant.

Each `Deliverer` runs with its production shares and batch size and the real `deliver` over
`SafeSender` and the deliverer's `DeliveryClient`. The dead endpoint is a socket that reads
the request and never answers; the live one answers ``204`` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from frontdoor_core.ids import new_id
from frontdoor_core.outbound import OutboundPolicy
from frontdoor_core.runtime import Runtime
from frontdoor_dispatcher.deliverer import Deliverer
from frontdoor_dispatcher.lanes import PER_ENDPOINT
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy, SafeSender, create_endpoint
from frontdoor_webhooks.delivery_client import DeliveryClient
from frontdoor_webhooks.messages import enqueue_message

from tests.conftest import unique

# The fault e2e test's retries; a 20 s timeout, so that waiting for one of the dead endpoint's
# timeouts (the failure this test looks for) is far longer than a delivery on a loaded machine:
# the bound below (half the timeout) does not measure speed, only that nothing waited for one.
POLICY = DeliveryPolicy(
    retry=RetryPolicy(schedule=tuple(timedelta(milliseconds=ms) for ms in (0, 200, 500, 1000, 1000, 2000)),
                      jitter=0.0, retry_after_max=timedelta(minutes=1)),
    timeout=timedelta(seconds=20), lease=timedelta(seconds=30), disable_after=timedelta(hours=1))
ROUNDS = 5


class Loopback:
    """Two HTTP/1.1 servers on 127.0.0.1: ``dead`` never answers, ``live`` answers 204 at once."""

    def __init__(self) -> None:
        self.live_ids: list[str] = []
        self.dead_requests = 0
        self._servers: list[asyncio.base_events.Server] = []
        self._hanging: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Loopback:
        self.dead = await self._serve(self._dead)
        self.live = await self._serve(self._live)
        return self

    async def __aexit__(self, *_: object) -> None:
        for writer in self._hanging:
            writer.close()
        for server in self._servers:
            server.close()

    async def _serve(self, handler: Any) -> str:
        server = await asyncio.start_server(handler, "127.0.0.1", 0, backlog=1024)
        self._servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hook"

    @staticmethod
    async def _request(reader: asyncio.StreamReader) -> dict[str, str]:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        await reader.readexactly(int(headers.get("content-length", "0")))
        return headers

    async def _dead(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._hanging.add(writer)
        with contextlib.suppress(Exception):
            await self._request(reader)
            self.dead_requests += 1
            await reader.read()  # until the sender gives up and closes
        self._hanging.discard(writer)
        writer.close()

    async def _live(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while True:
                headers = await self._request(reader)
                self.live_ids.append(headers["webhook-id"])
                writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        writer.close()


@pytest.fixture
async def loopback() -> AsyncIterator[Loopback]:
    async with Loopback() as servers:
        yield servers


async def _tenant_endpoint(runtime: Runtime, kek: Kek, url: str) -> tuple[str, str]:
    tenant_id = new_id("ten")
    async with runtime.pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ($1, $2, 'Relay Co')",
                           tenant_id, unique("relay-"))
        created = await create_endpoint(conn, Actor(tenant_id=tenant_id, type="api_key"), url=url, kek=kek,
                                        now=runtime.clock(), allow_insecure=True)
    return tenant_id, created.endpoint.id


async def _enqueue(runtime: Runtime, tenant_id: str, endpoint_id: str, count: int) -> list[str]:
    async with runtime.pool.acquire() as conn, conn.transaction():
        return [await enqueue_message(conn, tenant_id, endpoint_id, "operation.succeeded", {"n": i},
                                      purpose="event", now=runtime.clock()) for i in range(count)]


async def test_a_dead_endpoints_backlog_does_not_delay_another_tenant(runtime: Runtime, loopback: Loopback) -> None:
    kek = Kek.from_env_value(runtime.settings.kek)
    dead_tenant, dead = await _tenant_endpoint(runtime, kek, loopback.dead)
    live_tenant, live = await _tenant_endpoint(runtime, kek, loopback.live)
    # The deliverer's own transport (main() builds the same), over real loopback sockets.
    sender = SafeSender(DeliveryClient(OutboundPolicy(allow_http_loopback=True, total_timeout=5.0)))
    replicas = [Deliverer(runtime.settings.database_url, runtime.pool, sender=sender, kek=kek, policy=POLICY,
                          clock=runtime.clock) for _ in range(2)]
    tasks = [asyncio.create_task(d.run()) for d in replicas]
    lags: list[float] = []
    try:
        await asyncio.sleep(0.2)  # listening
        await _enqueue(runtime, dead_tenant, dead, 300)
        deadline = time.monotonic() + 10
        while loopback.dead_requests < 2 * PER_ENDPOINT and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert loopback.dead_requests >= 2 * PER_ENDPOINT  # both replicas' dead-endpoint slots are taken
        for _ in range(ROUNDS):
            await asyncio.sleep(0.2)
            t0 = time.monotonic()
            ids = set(await _enqueue(runtime, live_tenant, live, 10))
            deadline = t0 + 30
            while not ids <= set(loopback.live_ids) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            lags.append(time.monotonic() - t0)
            assert ids <= set(loopback.live_ids), (
                f"{len(ids & set(loopback.live_ids))} of 10 of the other tenant's messages arrived in 30 s, lags {lags}")
    finally:
        async with runtime.pool.acquire() as conn:  # stop the dead endpoint's retries
            await conn.execute("UPDATE webhook_messages SET state = 'aborted' WHERE endpoint_id = $1"
                               " AND state = 'pending'", dead)
        for d in replicas:
            d.stop()
        for writer in list(loopback._hanging):  # the dead endpoint's attempts end now
            writer.close()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)
    print(f"lags {[round(lag, 2) for lag in lags]}, dead requests {loopback.dead_requests}")
    # Each replica holds at most its share of the dead endpoint's messages and claims the
    # other tenant's past it: they never wait for the dead endpoint's timeouts.
    assert max(lags) < POLICY.timeout.total_seconds() / 2, lags
