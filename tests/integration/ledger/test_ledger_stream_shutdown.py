"""A deploy is not held by agents' open conversation streams and long polls (PAP §7.5, §7.6, #16).

The ledger under granian, as its image runs it, with an agent's event stream open (its duration
5 minutes), is sent SIGTERM: the stream ends at once after the events it had (``: restarting``:
the agent reconnects elsewhere with ``Last-Event-ID``) and the process exits cleanly, long before
the stream would have ended. In process, with the notice given by hand once the request waits: a
30-second long poll answers ``200`` at once with no new events and its cursor (the agent polls
again), and a stream ends the same way."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from frontdoor_core.settings import Settings
from frontdoor_httpkit import ShutdownNotice
from frontdoor_ledger.http import agent_conversations

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER
from tests.integration.ledger.test_ledger_conversations import make_desk
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.granian_app import GranianApp, service_env
from tests.support.mock_web import MockWeb
from tests.support.servers import Servers

GENEROUS = 30.0  # seconds: the stream alone would hold the process for 300


@pytest.mark.parametrize("workers", [None, 2], ids=["granian-one-worker", "launcher-two-workers"])
async def test_sigterm_ends_an_agents_stream_and_the_ledger_stops(
        console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
        web: MockWeb, servers: Servers, dns: LocalDNS, kek_value: str, workers: int | None) -> None:
    """``workers``: None runs granian itself with one worker; 2 runs ``frontdoor_ledger.serve`` with
    ``FRONTDOOR_LEDGER_WORKERS=2`` (granian's main process relays the signal to the worker serving
    the stream, whose notice ends it; the other worker stops too)."""
    desk = await make_desk(console, issuer, ledger, tenant, clock, store, web)
    desk.support.reply = False  # nothing more happens in the conversation: only the signal ends the stream
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    token = str((await desk.company.session(agent, unique("usr_")))["access_token"])
    r = await desk.start(agent, token, "Is anyone there?")
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    backlog = (await desk.call(agent, token, "GET", f"/{cid}/events")).json()

    def auth(method: str, path: str) -> dict[str, str]:
        proof = agent.dpop(method, f"{LEDGER}/{tenant.slug}/conversations{path}", token=token, iat=desk.company.now())
        return {"Authorization": f"DPoP {token}", "DPoP": proof}

    extra = {} if workers is None else {"FRONTDOOR_LEDGER_WORKERS": str(workers)}
    app = GranianApp("frontdoor_ledger.asgi:app", service_env(servers, dns, kek_value, **extra),
                     launcher=None if workers is None else "frontdoor_ledger.serve")
    try:
        await app.ready(workers=workers or 1)
        frames: list[bytes] = []
        opened = asyncio.Event()
        path = f"/{tenant.slug}/conversations/{cid}/events"

        async def watch() -> None:
            async with httpx.AsyncClient(base_url=app.base, timeout=httpx.Timeout(10, read=None)) as http, \
                    http.stream("GET", path, headers={**auth("GET", f"/{cid}/events"),
                                                      "Accept": "text/event-stream"}) as r:
                assert r.status_code == 200, await r.aread()
                async for chunk in r.aiter_bytes():
                    frames.append(chunk)
                    if backlog["cursor"].encode() in b"".join(frames):
                        opened.set()

        reader = asyncio.create_task(watch())
        async with asyncio.timeout(GENEROUS):
            await opened.wait()  # the backlog arrived: the stream now waits for news
        started = time.monotonic()
        app.terminate()
        async with asyncio.timeout(GENEROUS):
            await reader
        stream = b"".join(frames)
        assert stream.endswith(b": restarting\n\n"), stream[-300:]
        ids = [line.split(b": ", 1)[1].decode() for line in stream.split(b"\n") if line.startswith(b"id: ")]
        assert ids and ids[-1] == backlog["cursor"]  # the agent resumes after this with Last-Event-ID
        try:
            code = await asyncio.to_thread(app.proc.wait, GENEROUS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the ledger did not stop within {GENEROUS} s of SIGTERM; its log:\n{app.output()}")
        assert code == 0, app.output()
        if workers is not None:  # the launcher did start them all
            assert f"Spawning worker-{workers} " in app.output(), app.output()
        assert time.monotonic() - started < GENEROUS
    finally:
        app.close()


async def _desk_conversation(console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock,
                             store: Any, web: MockWeb) -> tuple[Any, TestAgent, str, str, dict[str, Any]]:
    desk = await make_desk(console, issuer, ledger, tenant, clock, store, web)
    desk.support.reply = False
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    token = str((await desk.company.session(agent, unique("usr_")))["access_token"])
    r = await desk.start(agent, token, "Is anyone there?")
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    return desk, agent, token, cid, (await desk.call(agent, token, "GET", f"/{cid}/events")).json()


@contextlib.asynccontextmanager
async def _ledger_in_this_loop(settings: Settings, clock: ShiftableClock, web: MockWeb
                               ) -> AsyncIterator[httpx.AsyncClient]:
    """A ledger app in the test's event loop (the session's test client runs its own), so requests run concurrently."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=LEDGER) as own:
        yield own


async def _subscribed(notice: ShutdownNotice, task: asyncio.Task[Any]) -> None:
    async with asyncio.timeout(GENEROUS):
        while notice.subscribers == 0:  # the request reached its wait
            assert not task.done(), task.result()
            await asyncio.sleep(0.01)


async def test_the_notice_answers_a_waiting_long_poll_at_once(
        console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
        web: MockWeb, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    notice = ShutdownNotice(())  # this process's own notice would end every later test's streams
    monkeypatch.setattr(agent_conversations, "shutdown_notice", notice)
    desk, agent, token, cid, backlog = await _desk_conversation(console, issuer, ledger, tenant, clock, store, web)
    async with _ledger_in_this_loop(settings, clock, web) as own:
        poll = asyncio.create_task(desk.call(agent, token, "GET", f"/{cid}/events", client=own,  # type: ignore[arg-type]
                                             query=f"cursor={backlog['cursor']}&wait=30"))
        await _subscribed(notice, poll)
        notice.begin()
        async with asyncio.timeout(20):  # generous, and still well short of the 30 s wait
            answered = await poll
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["events"] == [] and body["cursor"] == backlog["cursor"] and body["status"] == backlog["status"]
    # Once the notice came, a new long poll answers without waiting.
    again = await desk.call(agent, token, "GET", f"/{cid}/events", query=f"cursor={backlog['cursor']}&wait=30")
    assert again.status_code == 200 and again.json()["events"] == []


async def test_the_notice_ends_an_open_stream_after_its_events(
        console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock, store: Any,
        web: MockWeb, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    notice = ShutdownNotice(())
    monkeypatch.setattr(agent_conversations, "shutdown_notice", notice)
    desk, agent, token, cid, backlog = await _desk_conversation(console, issuer, ledger, tenant, clock, store, web)
    async with _ledger_in_this_loop(settings, clock, web) as own:
        stream = asyncio.create_task(desk.call(agent, token, "GET", f"/{cid}/events", client=own,  # type: ignore[arg-type]
                                               headers={"Accept": "text/event-stream"}))
        await _subscribed(notice, stream)
        notice.begin()
        async with asyncio.timeout(GENEROUS):  # not the 5-minute stream duration
            r = await stream
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert r.text.endswith(": restarting\n\n")
    ids = [line[4:] for line in r.text.split("\n") if line.startswith("id: ")]
    assert ids[-1] == backlog["cursor"] and len(ids) == len(backlog["events"])
