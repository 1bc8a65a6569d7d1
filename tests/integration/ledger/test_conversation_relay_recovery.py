"""The conversation relay survives its ledger: a relay whose process died (SIGKILL) after the agent's
message was recorded, before or while the company's endpoint was being asked, is sent by a deliverer
once the writer's lease ends, and the company's answer is recorded exactly once, also when the relay
is sent again (ADR 0006, addendum; docs/conversations.md).

The writer is a child process (`relay_writer`: the ledger's fast path, ``store.start`` with the relay
and ``relay_message``); the company's endpoint is a real HTTP server on 127.0.0.1 that checks each
request's signature; the deliverer is the real one, limited to this test's tenant (the database is
shared with parallel tests)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from frontdoor_conversations import store
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_dispatcher.deliverer import Deliverer
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.claims import claim_due
from frontdoor_webhooks.sender import SafeSender
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.conftest import sign_up
from tests.integration.dispatcher.test_deliverer import POLICY, _TenantsLanes, running
from tests.support.clock import ShiftableClock
from tests.support.eventually import eventually

ROOT = Path(__file__).resolve().parents[3]
WRITER_LEASE = 30.0  # the child's claim: far longer than the test runs, so only the lease's end frees it


class CompanyServer:
    """The company's conversation endpoint over real sockets: verifies, records, answers (or holds)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.arrived = asyncio.Event()
        self.hold: asyncio.Event | None = None
        self.answer: Callable[[dict[str, Any]], dict[str, Any]] = lambda p: {
            "messages": [{"text": f"You said: {p['data']['message']['text']}"}]}
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CompanyServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        if self.hold is not None:
            self.hold.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in head[1:] if ":" in h)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            payload = Webhook(self.secret).verify(body, headers)  # raises unless signed with the secret
            self.requests.append((headers, payload))
            self.arrived.set()
            if self.hold is not None:
                await self.hold.wait()  # the test kills the writer meanwhile
            out = json.dumps(self.answer(payload)).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                         + f"Content-Length: {len(out)}\r\n\r\n".encode() + out)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass  # the writer died with the connection open
        finally:
            with suppress(OSError):
                writer.close()


def _sender() -> SafeSender:
    return SafeSender(SafeFetcher(OutboundPolicy(allow_http_loopback=True)))


def _deliverer(runtime: Runtime, settings: Settings, kek_value: str, clock: ShiftableClock, tenant_id: str) -> Deliverer:
    return Deliverer(settings.database_url, runtime.pool, sender=_sender(), kek=Kek.from_env_value(kek_value),
                     policy=POLICY, clock=clock, idle_wake=0.2, lanes=_TenantsLanes({tenant_id}))


async def _relay_endpoint(console: AsyncTestClient[Any], auth: dict[str, str], runtime: Runtime,
                          tenant_id: str, port: int) -> tuple[str, str]:
    r = await console.post("/api/v1/webhook-endpoints", headers=auth,
                           json={"url": f"https://{unique('relay-')}.example/relay", "description": "relay"})
    assert r.status_code == 201, r.text
    endpoint_id = str(r.json()["endpoint"]["id"])
    async with runtime.pool.acquire() as conn:  # the company's server on this machine (plain http, loopback)
        await conn.execute("UPDATE webhook_endpoints SET url = $3 WHERE tenant_id = $1 AND id = $2",
                           tenant_id, endpoint_id, f"http://127.0.0.1:{port}/relay")
    return endpoint_id, str(r.json()["secret"])


async def _events(runtime: Runtime, tenant_id: str, cid: str) -> tuple[str, list[tuple[Any, ...]]]:
    async with runtime.pool.acquire() as conn:
        conversation = await store.find(conn, tenant_id, cid)
        assert conversation is not None
        page = await store.read_page(conn, conversation, None)
    return conversation.status, [(e["type"], (e.get("message") or {}).get("role"),
                                  (e.get("message") or {}).get("text"), e.get("status")) for e in page.events]


async def _relay_row(runtime: Runtime, tenant_id: str, relay_id: str) -> dict[str, Any]:
    async with runtime.pool.acquire() as conn:
        row = await conn.fetchrow("SELECT state, attempts, locked_until, purpose, event_type FROM webhook_messages"
                                  " WHERE tenant_id = $1 AND id = $2", tenant_id, relay_id)
        attempts = await conn.fetch("SELECT attempt, response_status FROM webhook_attempts WHERE tenant_id = $1"
                                    " AND message_id = $2 ORDER BY attempt", tenant_id, relay_id)
    assert row is not None
    return {**dict(row), "attempt_rows": [(a["attempt"], a["response_status"]) for a in attempts]}


@pytest.mark.parametrize("killed", ["after-commit", "mid-request"])
async def test_a_relay_whose_ledger_was_killed_is_sent_after_the_lease_and_answered_once(
        console: AsyncTestClient[Any], runtime: Runtime, settings: Settings, kek_value: str, clock: ShiftableClock,
        killed: str) -> None:
    tenant = await sign_up(console)
    async with CompanyServer("") as company:
        endpoint_id, company.secret = await _relay_endpoint(console, tenant.auth, runtime, tenant.id, company.port)
        if killed == "mid-request":
            company.hold = asyncio.Event()
        config = {"database_url": settings.database_url, "kek": kek_value, "tenant_id": tenant.id,
                  "endpoint_id": endpoint_id, "lease_seconds": WRITER_LEASE, "timeout_seconds": 10}
        flags = ["--die-after-commit"] if killed == "after-commit" else []
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.integration.ledger.relay_writer", json.dumps(config), *flags, cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            assert writer.stdout is not None
            line = (await asyncio.wait_for(writer.stdout.readline(), 60)).decode()
            assert line.startswith("recorded "), line + (await writer.stderr.read()).decode()  # type: ignore[union-attr]
            _, cid, relay_id = line.split()
            if killed == "mid-request":
                await asyncio.wait_for(company.arrived.wait(), 30)  # the company holds the relay's request ...
                writer.send_signal(signal.SIGKILL)  # ... when its ledger dies
            assert await asyncio.wait_for(writer.wait(), 30) == -signal.SIGKILL
        finally:
            if writer.returncode is None:
                writer.kill()
                await writer.wait()
        if company.hold is not None:
            company.hold.set()  # its answer goes to a dead socket
        assert len(company.requests) == (1 if killed == "mid-request" else 0)

        # What the crash left: the agent's message recorded, the conversation working, the relay
        # leased to the dead writer, not settled.
        status, events = await _events(runtime, tenant.id, cid)
        assert status == "working"
        assert events == [("message", "user", "Where is my order?", None), ("state", None, None, "working")]
        row = await _relay_row(runtime, tenant.id, relay_id)
        assert (row["purpose"], row["event_type"], row["state"], row["attempts"]) == (
            "relay", "conversation.relay", "pending", 1)
        assert row["locked_until"] is not None and row["attempt_rows"] == []
        async with runtime.pool.acquire() as conn:  # within the lease no deliverer may take it
            taken, _ = await claim_due(conn, clock(), POLICY.lease, limit=50,
                                       choose=lambda found: [c for c in found if c.id == relay_id])
        assert taken == []

        clock.advance(seconds=WRITER_LEASE + 1)  # the lease has ended
        async with running(_deliverer(runtime, settings, kek_value, clock, tenant.id)):
            async def answered() -> None:
                assert (await _events(runtime, tenant.id, cid))[0] == "idle"

            await eventually(answered, timeout=30)
        status, events = await _events(runtime, tenant.id, cid)
        assert events == [("message", "user", "Where is my order?", None), ("state", None, None, "working"),
                          ("message", "company", "You said: Where is my order?", None),
                          ("state", None, None, "idle")]  # the answer, once
        # Sent again under the same webhook-id after the kill mid-request, so the company can tell.
        assert [h["webhook-id"] for h, _ in company.requests] == [relay_id] * (2 if killed == "mid-request" else 1)
        row = await _relay_row(runtime, tenant.id, relay_id)
        assert (row["state"], row["attempts"], row["attempt_rows"]) == ("delivered", 2, [(2, 200)])

        # An operator sends the relay again: the company answers differently; nothing more is recorded.
        company.answer = lambda p: {"messages": [{"text": "A second answer"}], "handoff": True}
        sent = len(company.requests)
        r = await console.post(f"/api/v1/webhook-messages/{relay_id}/redeliver", headers=tenant.auth)
        assert r.status_code == 200, r.text
        async with running(_deliverer(runtime, settings, kek_value, clock, tenant.id)):
            async def redelivered() -> None:
                assert (await _relay_row(runtime, tenant.id, relay_id))["state"] == "delivered"
                assert len(company.requests) == sent + 1

            await eventually(redelivered, timeout=30)
        assert await _events(runtime, tenant.id, cid) == (status, events)
