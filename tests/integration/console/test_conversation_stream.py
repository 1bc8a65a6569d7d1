"""The handoff inbox's live streams at the wire (#16): ``GET /conversations/stream`` and
``GET /conversations/{id}/stream`` answer Server-Sent Events that tell the page to re-fetch.

Two console replicas (B and C, each its own app under uvicorn on a loopback port) serve the
streams; the changes come through a third console app (the shared in-process client, A) or
from the ledger's side (the store and `publish_changed`, as the ledger does), all over the
worker's one Redis. Asserted: status and headers, the framing (``retry:``, ``event: changed``,
heartbeat comments, ``event: closed``), tenant isolation (404 before streaming, no wake-up
from another tenant), viewers' access, a change arriving within a bound on another process,
the bounded lifetime, that a client going away leaves no reader, lease or task behind, and
the per-member and per-tenant caps (``429``) across replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from frontdoor_conversations import publish_changed, store
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_conversation_inbox import caller, handed_off, start
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.support.eventually import eventually

WAKE_BOUND = 3.0  # seconds from a change to its event on another process (1 s coalescing gap at most)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Replica:
    app: Any
    url: str

    @property
    def streams(self) -> Any:
        return self.app.state.conversation_streams


@pytest.fixture(scope="module")
async def replicas(settings: Settings, migrated: str) -> AsyncIterator[list[Replica]]:
    import uvicorn
    from frontdoor_console.app import create_app

    served: list[tuple[Replica, Any, asyncio.Task[None]]] = []
    for _ in range(2):
        port = _free_port()
        app = create_app(settings)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                               lifespan="on", timeout_graceful_shutdown=3))
        task = asyncio.create_task(server.serve())
        for _ in range(500):
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        assert server.started, "a console replica did not start"
        served.append((Replica(app, f"http://127.0.0.1:{port}"), server, task))
    try:
        yield [r for r, _, _ in served]
    finally:
        for _, server, _task in served:
            server.should_exit = True
        for _, _, task in served:
            await asyncio.wait_for(task, timeout=10)


@pytest.fixture
def tuned(replicas: list[Replica]) -> Iterator[list[Replica]]:
    """The replicas, their streams' settings put back after the test."""
    saved = [(r.streams.lifetime, r.streams.heartbeat, r.streams.per_member, r.streams.per_tenant) for r in replicas]
    try:
        yield replicas
    finally:
        for r, (lifetime, heartbeat, member, tenant) in zip(replicas, saved, strict=True):
            r.streams.lifetime, r.streams.heartbeat, r.streams.per_member, r.streams.per_tenant = (
                lifetime, heartbeat, member, tenant)


async def cookie_of(console: AsyncTestClient[Any], email: str) -> tuple[str, str]:
    """A member's session cookie (valid at every replica: sessions live in PostgreSQL) and CSRF token."""
    csrf = await sign_in(console, email)
    value = console.cookies.get("fd_session")
    assert value
    return f"fd_session={value}", csrf


class Events:
    """An open stream's text as it arrives (read by a task of its own, so a wait may time out)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.text = ""
        self.done = False
        self._grew = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for chunk in self.response.aiter_text():
                self.text += chunk
                self._grew.set()
        except httpx.HTTPError:
            pass
        finally:
            self.done = True
            self._grew.set()

    async def until(self, needle: str, *, after: int = 0, timeout: float = WAKE_BOUND) -> float:
        """Wait until ``needle`` appears past offset ``after``; answer the seconds it took."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(timeout):
            while needle not in self.text[after:]:
                assert not self.done, f"the stream ended without {needle!r}: {self.text[after:]!r}"
                self._grew.clear()
                await self._grew.wait()
        return loop.time() - began

    async def quiet(self, needle: str, seconds: float) -> None:
        """Nothing containing ``needle`` arrives for ``seconds``."""
        mark = len(self.text)
        with contextlib.suppress(TimeoutError):
            await self.until(needle, after=mark, timeout=seconds)
        assert needle not in self.text[mark:], self.text[mark:]

    async def ended(self, timeout: float) -> None:
        await asyncio.wait_for(asyncio.shield(self._task), timeout)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.response.aclose()


@contextlib.asynccontextmanager
async def stream(url: str, cookie: str) -> AsyncIterator[Events]:
    headers = {"Cookie": cookie, "Accept": "text/event-stream"}
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as client, \
            client.stream("GET", url, headers=headers) as r:
        assert r.status_code == 200, (r.status_code, await r.aread())
        events = Events(r)
        try:
            await events.until("retry: 3000\n")
            yield events
        finally:
            await events.close()


async def open_status(url: str, cookie: str) -> httpx.Response:
    """The answer of a stream request that is refused (read whole: it is not a stream)."""
    async with httpx.AsyncClient(timeout=10, follow_redirects=False) as client:
        return await client.get(url, headers={"Cookie": cookie, "Accept": "text/event-stream"})


async def leases(runtime: Runtime, tenant_id: str) -> int:
    return int(await runtime.redis.zcard(f"console:streams:{{{tenant_id}}}:tenant"))


async def test_the_inbox_stream_wakes_on_a_change_made_at_another_process(
        console: AsyncTestClient[Any], replicas: list[Replica], tenant: TenantHandle, other_tenant: TenantHandle,
        runtime: Runtime) -> None:
    b, c = replicas
    cookie, csrf = await cookie_of(console, tenant.email)
    queued, _ = await handed_off(runtime, tenant.id)
    async with stream(f"{b.url}/conversations/stream", cookie) as on_b, \
            stream(f"{c.url}/conversations/stream", cookie) as on_c:
        r = on_b.response
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["cache-control"] == "no-store" and r.headers["x-accel-buffering"] == "no"
        assert on_b.text.startswith("retry: 3000\n")

        # A take-over through console A wakes the inbox on B and on C.
        mark_b, mark_c = len(on_b.text), len(on_c.text)
        r2 = await console.post(f"/conversations/{queued}/take-over", headers={"x-csrftoken": csrf},
                                follow_redirects=False)
        assert r2.status_code == 303
        assert await on_b.until("event: changed\ndata: inbox\n\n", after=mark_b) < WAKE_BOUND
        assert await on_c.until("event: changed\ndata: inbox\n\n", after=mark_c) < WAKE_BOUND

        # The ledger's side: an agent starts a conversation; the store commits, the ledger publishes.
        mark = len(on_b.text)
        fresh = await start(runtime, tenant.id, caller(), "Hello?")
        await publish_changed(runtime.redis, tenant.id, fresh)
        assert await on_b.until("event: changed", after=mark) < WAKE_BOUND
        # Rows re-fetched on that event show it (the event itself carries nothing).
        assert fresh in (await console.get("/conversations/rows", params={"view": "open"})).text

        # Another tenant's conversations wake nothing here; a text delta wakes nothing either.
        theirs = await start(runtime, other_tenant.id, caller(), "Theirs")
        await publish_changed(runtime.redis, other_tenant.id, theirs)
        await runtime.redis.publish("frontdoor:conversations:changed",
                                    f'{{"k":"{tenant.id}:{fresh}","d":{{"message_id":"m","text":"He"}}}}')
        await on_b.quiet("event: changed", 2.0)
    console.cookies.clear()


async def test_a_conversation_stream_is_tenant_scoped_read_by_viewers_and_ends_at_close(
        console: AsyncTestClient[Any], replicas: list[Replica], tenant: TenantHandle, other_tenant: TenantHandle,
        runtime: Runtime, db: Any) -> None:
    b, _ = replicas
    queued, _ = await handed_off(runtime, tenant.id)
    neighbour, _ = await handed_off(runtime, tenant.id)
    theirs, _ = await handed_off(runtime, other_tenant.id)
    viewer_cookie, _ = await cookie_of(console, await add_admin(db, tenant, "viewer"))
    cookie, csrf = await cookie_of(console, tenant.email)

    # Another tenant's conversation, or none: 404 before any stream (the error page, not an event stream).
    for cid in (theirs, "cnv_unknown"):
        r = await open_status(f"{b.url}/conversations/{cid}/stream", cookie)
        assert r.status_code == 404 and not r.headers["content-type"].startswith("text/event-stream"), cid
    assert await leases(runtime, tenant.id) == 0
    # Signed out: to the sign-in page, no stream.
    r = await open_status(f"{b.url}/conversations/{queued}/stream", "fd_session=nobody")
    assert r.status_code in (303, 401) and "event-stream" not in r.headers.get("content-type", "")

    async with stream(f"{b.url}/conversations/{queued}/stream", viewer_cookie) as watching:  # viewers read
        mark = len(watching.text)
        # A change to another conversation of the tenant does not wake this one.
        await console.post(f"/conversations/{neighbour}/take-over", headers={"x-csrftoken": csrf},
                           follow_redirects=False)
        await watching.quiet("event: changed", 1.5)
        r = await console.post(f"/conversations/{queued}/take-over", headers={"x-csrftoken": csrf},
                               follow_redirects=False)
        assert r.status_code == 303
        assert await watching.until(f"event: changed\ndata: {queued}\n\n", after=mark) < WAKE_BOUND
        # A reply posted by the member (through A) arrives as an event too.
        mark = len(watching.text)
        detail = await console.get(f"/conversations/{queued}")
        assert f'data-stream="/conversations/{queued}/stream"' in detail.text
        r = await console.post(f"/conversations/{queued}/reply", data={"text": "On its way.", "_csrf_token": csrf},
                               follow_redirects=False)
        assert r.status_code == 303
        assert await watching.until(f"event: changed\ndata: {queued}\n\n", after=mark) < WAKE_BOUND
        assert "On its way." in (await console.get(f"/conversations/{queued}/live")).text
        # Closing it: one last change, then "closed", then the stream ends.
        mark = len(watching.text)
        r = await console.post(f"/conversations/{queued}/close", data={"confirm": "yes", "_csrf_token": csrf},
                               follow_redirects=False)
        assert r.status_code == 303
        await watching.until(f"event: closed\ndata: {queued}\n\n", after=mark)
        await watching.ended(timeout=3)
        assert watching.text[mark:].index("event: changed") < watching.text[mark:].index("event: closed")
    # A closed conversation's stream is 204: an EventSource stops reconnecting.
    r = await open_status(f"{b.url}/conversations/{queued}/stream", viewer_cookie)
    assert r.status_code == 204 and r.content == b""
    await eventually(lambda: _no_leases(runtime, tenant.id))
    console.cookies.clear()


async def _no_leases(runtime: Runtime, tenant_id: str) -> None:
    assert await leases(runtime, tenant_id) == 0


async def test_heartbeats_and_a_bounded_lifetime(console: AsyncTestClient[Any], tuned: list[Replica],
                                                 tenant: TenantHandle, runtime: Runtime) -> None:
    b, _ = tuned
    b.streams.heartbeat, b.streams.lifetime = 0.3, 1.5
    cookie, _ = await cookie_of(console, tenant.email)
    loop = asyncio.get_running_loop()
    async with stream(f"{b.url}/conversations/stream", cookie) as events:
        began = loop.time()
        await events.until(": keep-alive\n\n", timeout=2)
        await events.ended(timeout=4)  # the server ends it; the browser reconnects after `retry`
        assert 1.2 < loop.time() - began < 4
        assert events.text.count(": keep-alive\n\n") >= 3
    await eventually(lambda: _no_leases(runtime, tenant.id))
    assert b.streams.open_streams == 0
    console.cookies.clear()


async def test_a_client_going_away_leaves_no_reader_lease_or_task(console: AsyncTestClient[Any],
                                                                  replicas: list[Replica], tenant: TenantHandle,
                                                                  runtime: Runtime) -> None:
    b, _ = replicas
    cookie, _ = await cookie_of(console, tenant.email)
    queued, _ = await handed_off(runtime, tenant.id)
    before = {t for t in asyncio.all_tasks() if not t.done()}
    for path in ("/conversations/stream", f"/conversations/{queued}/stream"):
        async with stream(f"{b.url}{path}", cookie):
            assert b.streams.open_streams == 1 and await leases(runtime, tenant.id) == 1
        # The client closed the connection mid-stream.

        async def cleaned() -> None:
            assert b.streams.open_streams == 0
            assert await leases(runtime, tenant.id) == 0

        await eventually(cleaned, timeout=5)

    async def no_new_tasks() -> None:
        left = {t for t in asyncio.all_tasks() if not t.done()} - before - {asyncio.current_task()}
        assert not left, left

    await eventually(no_new_tasks, timeout=5)
    console.cookies.clear()


async def test_streams_are_capped_per_member_and_per_tenant_across_replicas(
        console: AsyncTestClient[Any], tuned: list[Replica], tenant: TenantHandle, runtime: Runtime,
        db: Any) -> None:
    b, c = tuned
    for r in tuned:
        r.streams.per_member, r.streams.per_tenant = 2, 3
    owner, _ = await cookie_of(console, tenant.email)
    colleague, _ = await cookie_of(console, await add_admin(db, tenant, "admin"))
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(stream(f"{b.url}/conversations/stream", owner))
        first_on_c = await stack.enter_async_context(stream(f"{c.url}/conversations/stream", owner))
        r = await open_status(f"{b.url}/conversations/stream", owner)  # a third for this member, anywhere
        assert r.status_code == 429 and r.headers["retry-after"] == "60"
        assert r.headers["cache-control"] == "no-store" and "every 2 seconds" in r.text
        await stack.enter_async_context(stream(f"{c.url}/conversations/stream", colleague))
        r = await open_status(f"{b.url}/conversations/stream", colleague)  # the tenant's fourth
        assert r.status_code == 429
        assert await leases(runtime, tenant.id) == 3  # refusals hold nothing

        # One closes: the member may open another.
        await first_on_c.close()
        await eventually(lambda: _leases_are(runtime, tenant.id, 2), timeout=5)
        await stack.enter_async_context(stream(f"{b.url}/conversations/stream", owner))

    # A lease left by a process that died expires on its own (its score is its expiry).
    await eventually(lambda: _no_leases(runtime, tenant.id))
    await runtime.redis.zadd(f"console:streams:{{{tenant.id}}}:tenant", {"dead1": 1.0, "dead2": 2.0, "dead3": 3.0})
    async with stream(f"{b.url}/conversations/stream", owner):
        assert await leases(runtime, tenant.id) == 1
    console.cookies.clear()


async def _leases_are(runtime: Runtime, tenant_id: str, n: int) -> None:
    assert await leases(runtime, tenant_id) == n


async def test_the_pages_poll_only_as_a_fallback(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                 runtime: Runtime) -> None:
    queued, _ = await handed_off(runtime, tenant.id)
    await sign_in(console, tenant.email)
    page = await console.get("/conversations")
    assert 'data-stream="/conversations/stream"' in page.text and '/static/live-stream.js' in page.text
    detail = await console.get(f"/conversations/{queued}")
    assert f'data-stream="/conversations/{queued}/stream"' in detail.text
    script = await console.get("/static/live-stream.js")
    assert script.status_code == 200 and "EventSource" in script.text
    async with runtime.pool.acquire() as conn:
        await store.close(conn, tenant.id, queued, now=runtime.clock())
    closed = await console.get(f"/conversations/{queued}")
    assert "data-stream=" not in closed.text and 'hx-trigger="every' not in closed.text  # nothing more happens
    console.cookies.clear()
