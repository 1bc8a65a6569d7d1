"""The sdk's lean HTTP/1.1 client against a real loopback server (an asyncio server here).

What goes over the socket is asserted: the request bytes Frontdoor receives, how many
connections were opened, and what the callers see of each answer: the state, or the
``...Unavailable`` / ``...Refused`` they fail closed with (PAP-4.9-01: no answer is never
"allow"), ``Retry-After`` included.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest
import trustme
from frontdoor_protocol import Confirmation, SessionTokenClaims, mint_session_token
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal
from frontdoor_sdk._lean_http import LeanClient, LeanHTTPError, lean_supports
from frontdoor_sdk.introspection import IntrospectionRefused, IntrospectionUnavailable, Introspector
from frontdoor_sdk.session_state import SessionStateClient, SessionStateUnavailable

from .kit import API_URL, CLIENT_ID, CREDENTIAL, NOW, Agent, Clock

ACTIVE = {"active": True, "sid": "ses_1", "iss": "x", "client_id": "c", "sub": "u"}


@dataclass
class Seen:
    """One request as the server read it."""

    connection: int
    number: int  # 1 for the first request on its connection
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    """What the server does with one request: ``data`` (raw bytes), then maybe close."""

    data: bytes = b""
    close: bool = False
    delay: float = 0.0
    late: bytes = b""  # sent 50 ms after ``data``, unasked (then the connection closes)


def answer(status: int = 200, body: Any = ACTIVE, *, headers: dict[str, str] | None = None,
           reason: str = "OK") -> bytes:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    fields = {"Content-Type": "application/json", "Content-Length": str(len(content)), **(headers or {})}
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode() + content


def chunked(parts: list[bytes], *, trailer: str = "") -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = b"".join(f"{len(p):x};ext=1\r\n".encode() + p + b"\r\n" for p in parts)
    return head + body + b"0\r\n" + trailer.encode() + b"\r\n"


Handler = Callable[[Seen], Reply | None]


@dataclass
class Loopback:
    """A real HTTP/1.1 server on 127.0.0.1; ``handler`` decides each answer (``None``: close unanswered)."""

    handler: Handler
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, tls: ssl.SSLContext | None = None) -> Loopback:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        self.open_now += 1
        connection, number = self.connections, 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                number += 1
                seen = Seen(connection, number, method, target, headers, body)
                self.seen.append(seen)
                reply = self.handler(seen)
                if reply is None:
                    return
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                writer.write(reply.data)
                await writer.drain()
                if reply.late:
                    await asyncio.sleep(0.05)
                    writer.write(reply.late)
                    await writer.drain()
                    await asyncio.sleep(0.2)  # the client must not take it as its next answer
                    return
                if reply.close:
                    return
        finally:
            self.open_now -= 1
            writer.close()
            self._tasks.discard(task)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[Loopback]]]:
    servers: list[Loopback] = []

    async def start(handler: Handler) -> Loopback:
        server = await Loopback(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def lean() -> AsyncIterator[LeanClient]:
    client = LeanClient()
    yield client
    await client.aclose()


def introspector(server: Loopback, http: LeanClient, *, timeout: float = 2.0) -> Introspector:
    return Introspector(f"{server.base}/shop-a/oauth/introspect", CREDENTIAL, http, timeout=timeout)


async def test_the_request_is_the_introspection_request(serve: Any, lean: LeanClient) -> None:
    """RFC 7662 §2.1: a form POST with the credential; the answer decodes into the state."""
    server = await serve(lambda seen: Reply(answer()))
    state = await introspector(server, lean).introspect("tok.en+/=")
    assert (state.active, state.sid) == (True, "ses_1")
    [seen] = server.seen
    assert (seen.method, seen.target) == ("POST", "/shop-a/oauth/introspect")
    assert seen.headers["host"] == f"127.0.0.1:{server.port}"
    assert seen.headers["authorization"] == f"Bearer {CREDENTIAL}"
    assert seen.headers["content-type"] == "application/x-www-form-urlencoded"
    assert seen.headers["accept"] == "application/json"
    assert seen.headers["user-agent"].startswith("frontdoor-sdk")
    assert "accept-encoding" not in seen.headers  # nothing to decode but identity
    assert parse_qs(seen.body.decode()) == {"token": ["tok.en+/="], "token_type_hint": ["access_token"]}


async def test_session_state_posts_json(serve: Any, lean: LeanClient) -> None:
    """ADR 0004 §6: the 1.0 ``session-state`` call sends its JSON body over the same pool."""
    server = await serve(lambda seen: Reply(answer(body={"state": "active", "session": "ses_9"})))
    client = SessionStateClient(f"{server.base}/shop-a/poppy/session-state", CREDENTIAL, lean)
    state = await client.check(client_id=CLIENT_ID, sid="s", sub="u", jti="j", iat=NOW, sgn="sgn_1")
    assert (state.state, state.session) == ("active", "ses_9")
    [seen] = server.seen
    assert seen.headers["content-type"] == "application/json"
    assert json.loads(seen.body) == {"client_id": CLIENT_ID, "sid": "s", "sub": "u", "jti": "j", "iat": NOW,
                                     "sgn": "sgn_1"}


async def test_session_state_fails_closed_with_retry_after(serve: Any, lean: LeanClient) -> None:
    server = await serve(lambda seen: Reply(answer(503, {"error": "busy"}, headers={"Retry-After": "4"})))
    client = SessionStateClient(f"{server.base}/shop-a/poppy/session-state", CREDENTIAL, lean)
    with pytest.raises(SessionStateUnavailable) as raised:
        await client.check(client_id=CLIENT_ID, sid="s", sub="u", jti="j", iat=NOW)
    assert raised.value.retry_after == "4"


async def test_sequential_calls_reuse_one_connection(serve: Any, lean: LeanClient) -> None:
    server = await serve(lambda seen: Reply(answer()))
    ask = introspector(server, lean)
    for _ in range(5):
        assert (await ask.introspect("t")).active
    assert server.connections == 1
    assert [s.number for s in server.seen] == [1, 2, 3, 4, 5]
    assert lean.connects == 1


async def test_concurrent_calls_get_connections_of_their_own(serve: Any, lean: LeanClient) -> None:
    """Parallel requests do not queue behind one connection; all succeed; then they are reused."""
    server = await serve(lambda seen: Reply(answer(), delay=0.05))
    ask = introspector(server, lean)
    states = await asyncio.gather(*(ask.introspect("t") for _ in range(8)))
    assert all(state.active for state in states)
    assert server.connections == 8
    assert len({s.connection for s in server.seen}) == 8
    await asyncio.gather(*(ask.introspect("t") for _ in range(8)))
    assert server.connections == 8  # the idle ones served the second round


async def test_a_chunked_answer_is_decoded(serve: Any, lean: LeanClient) -> None:
    """RFC 9112 §7.1: chunk extensions and a trailer are read past; the connection stays usable."""
    document = json.dumps(ACTIVE).encode()
    server = await serve(lambda seen: Reply(chunked([document[:5], document[5:17], document[17:]],
                                                    trailer="X-Trailer: 1\r\n")))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).sid == "ses_1"
    assert (await ask.introspect("t")).sid == "ses_1"
    assert server.connections == 1


async def test_a_trailer_over_the_head_cap_fails_closed(serve: Any, lean: LeanClient) -> None:
    """The trailer's lines together are capped like a head (16 KiB), not only each line: a
    trailer of many short fields is refused, not read on until the deadline."""
    document = json.dumps(ACTIVE).encode()
    server = await serve(lambda seen: Reply(chunked([document], trailer="X-T: 1\r\n" * 2_100)))  # 16.8 KB
    ask = introspector(server, lean, timeout=5)
    with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
        await ask.introspect("t")
    server.handler = lambda seen: Reply(chunked([document], trailer="X-T: 1\r\n" * 1_900))  # 15.2 KB
    assert (await ask.introspect("t")).active
    assert (await ask.introspect("t")).active
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (2, 1), (2, 2)]


@pytest.mark.parametrize("data", [
    answer(headers={f"X-F{n}": "v" * 40 for n in range(400)}),  # a 20 KB head, in one write
    b"HTTP/1.1 100 Continue\r\n\r\n" * 700 + answer(),  # 17.5 KB of interim heads
])
async def test_heads_over_the_cap_fail_closed(serve: Any, lean: LeanClient, data: bytes) -> None:
    """The head cap (16 KiB) is on the bytes however many reads brought them, interim answers'
    heads included, so endless 1xx answers are refused, not read until the deadline."""
    server = await serve(lambda seen: Reply(data))
    ask = introspector(server, lean, timeout=5)
    with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
        await ask.introspect("t")
    server.handler = lambda seen: Reply(b"HTTP/1.1 100 Continue\r\n\r\n" * 2 + answer())
    assert (await ask.introspect("t")).active
    assert server.connections == 2


@pytest.mark.parametrize("framing", ["content-length", "chunked", "until-close"])
async def test_an_oversize_answer_fails_closed(serve: Any, lean: LeanClient, framing: str) -> None:
    """Over 64 KiB is refused as no state; the rest is not read and the connection is dropped."""
    big = json.dumps({**ACTIVE, "pad": "x" * 70_000}).encode()
    data = {"content-length": answer(body=big), "chunked": chunked([big[:40_000], big[40_000:]]),
            "until-close": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + big}[framing]
    server = await serve(lambda seen: Reply(data, close=framing == "until-close"))
    ask = introspector(server, lean)
    with pytest.raises(IntrospectionUnavailable, match="introspection answered no state"):
        await ask.introspect("t")
    server.handler = lambda seen: Reply(answer())
    assert (await ask.introspect("t")).active
    assert server.connections == 2


async def test_an_idle_connection_the_server_closed_is_replaced(serve: Any, lean: LeanClient) -> None:
    """The server ends a kept-alive connection after answering; the next call opens a new one."""
    server = await serve(lambda seen: Reply(answer(), close=True))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    await asyncio.sleep(0.05)
    assert (await ask.introspect("t")).active
    assert server.connections == 2


async def test_an_idle_connection_that_received_bytes_is_not_reused(serve: Any, lean: LeanClient) -> None:
    """A server's unasked 408 on an idle connection (before it closes) is not the next answer."""
    server = await serve(lambda seen: Reply(answer(), late=b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
                         if seen.connection == 1 else Reply(answer()))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    await asyncio.sleep(0.1)  # the 408 arrived; the server has not closed yet
    assert (await ask.introspect("t")).active
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (2, 1)]


async def test_an_answer_with_more_bytes_behind_it_is_not_pooled(serve: Any, lean: LeanClient) -> None:
    """A 65,536-byte answer with a second answer behind it in the same write: the second is no
    answer to the next request (it would hand one request another's state); the connection that
    carried them is dropped and the next call gets its own answer on a new one."""
    stale = answer(body={**ACTIVE, "sid": "ses_stale"})
    pad = 65_536 - len(answer(body={**ACTIVE, "pad": ""}))
    pad -= len(answer(body={**ACTIVE, "pad": "x" * pad})) - 65_536  # Content-Length's own digits
    first = answer(body={**ACTIVE, "pad": "x" * pad})  # what one 64 KiB read takes
    assert len(first) == 65_536
    server = await serve(lambda seen: Reply(first + stale) if seen.connection == 1
                         else Reply(answer(body={**ACTIVE, "sid": f"ses_{seen.connection}_{seen.number}"})))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).sid == "ses_1"
    assert (await ask.introspect("t")).sid == "ses_2_1"
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (2, 1)]


async def test_bytes_after_a_buffer_filling_answer_are_seen_while_idle(serve: Any, lean: LeanClient) -> None:
    """An answer larger than one read (its socket reads paused meanwhile) is pooled; a 408 the
    server sends on it while idle is still seen, so it is no answer to the next request."""
    big = answer(body={**ACTIVE, "pad": "x" * 65_400})
    assert len(big) > 65_536
    server = await serve(lambda seen: Reply(big) if seen.number == 1 else
                         Reply(big, late=b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
                         if seen.connection == 1 else Reply(answer()))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    assert (await ask.introspect("t")).active  # the same connection
    await asyncio.sleep(0.1)  # the 408 arrived; the server has not closed yet
    assert (await ask.introspect("t")).active
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (1, 2), (2, 1)]


async def test_a_stale_connection_is_retried_once_on_a_new_one(serve: Any, lean: LeanClient) -> None:
    """The server closes a reused connection on reading the request, before any answer byte:
    sent again, once, on a fresh connection (RFC 9112 §9.3.1); the caller sees the answer."""
    server = await serve(lambda seen: None if seen.number == 2 else Reply(answer()))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    assert (await ask.introspect("t")).active
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (1, 2), (2, 1)]


async def test_a_new_connection_closed_unanswered_is_not_retried(serve: Any, lean: LeanClient) -> None:
    server = await serve(lambda seen: None)
    with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
        await introspector(server, lean).introspect("t")
    assert len(server.seen) == 1


async def test_a_close_mid_answer_is_unavailable_and_never_retried(serve: Any, lean: LeanClient) -> None:
    """Bytes of an answer arrived, then the connection ended: no retry (the call may have acted)."""
    server = await serve(lambda seen: Reply(answer()) if seen.number == 1 else Reply(answer()[:30], close=True))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
        await ask.introspect("t")
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (1, 2)]
    assert lean.connects == 1


async def test_a_close_after_an_interim_answer_is_never_retried(serve: Any, lean: LeanClient) -> None:
    """``100 Continue``, then the reused connection ends: bytes of an answer arrived, so the
    request may have been acted on; not sent again (a session-state ``jti`` would read as
    replayed), unavailable."""
    ok = answer(body={"state": "active", "session": "ses_9"})
    server = await serve(lambda seen: Reply(ok) if seen.number == 1 else
                         Reply(b"HTTP/1.1 100 Continue\r\n\r\n", close=True))
    client = SessionStateClient(f"{server.base}/shop-a/poppy/session-state", CREDENTIAL, lean)
    assert (await client.check(client_id=CLIENT_ID, sid="s", sub="u", jti="j1", iat=NOW)).state == "active"
    with pytest.raises(SessionStateUnavailable):
        await client.check(client_id=CLIENT_ID, sid="s", sub="u", jti="j2", iat=NOW)
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (1, 2)]
    assert [json.loads(s.body)["jti"] for s in server.seen] == ["j1", "j2"]
    assert lean.connects == 1


async def test_a_timeout_is_unavailable_and_the_connection_is_not_reused(serve: Any, lean: LeanClient) -> None:
    server = await serve(lambda seen: Reply(answer(), delay=0.5 if seen.connection == 1 else 0))
    ask = introspector(server, lean, timeout=0.1)
    with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
        await ask.introspect("t")
    assert (await ask.introspect("t")).active
    assert [s.connection for s in server.seen] == [1, 2]


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_429_and_5xx_carry_retry_after(serve: Any, lean: LeanClient, status: int) -> None:
    server = await serve(lambda seen: Reply(answer(status, {"error": "busy"}, headers={"RETRY-AFTER": "7"},
                                                   reason="Busy")))
    with pytest.raises(IntrospectionUnavailable) as raised:
        await introspector(server, lean).introspect("t")
    assert raised.value.retry_after == "7"


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_credential_is_refused(serve: Any, lean: LeanClient, status: int) -> None:
    server = await serve(lambda seen: Reply(answer(status, {"error": "invalid_client"})))
    with pytest.raises(IntrospectionRefused):
        await introspector(server, lean).introspect("t")


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 2\xb20 OK\r\nContent-Length: 0\r\n\r\n",  # a superscript two: a digit, not ASCII
    b"HTTP/1.1 \xd9\xa2\xd9\xa0\xd9\xa0 OK\r\nContent-Length: 0\r\n\r\n",  # Arabic-Indic, as UTF-8
    b"HTTP/1.1 099 Low\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\xb2\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
    b"HTTP/2 200\r\nContent-Length: 0\r\n\r\n",
    b"HELLO\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
    b"HTTP/1.1 200 OK\r\nBad Header: 1\r\nContent-Length: 2\r\n\r\n{}",
])
async def test_a_malformed_answer_is_unavailable(serve: Any, lean: LeanClient, data: bytes) -> None:
    server = await serve(lambda seen: Reply(data))
    ask = introspector(server, lean)
    with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
        await ask.introspect("t")
    server.handler = lambda seen: Reply(answer())
    assert (await ask.introspect("t")).active
    assert server.connections == 2  # the connection that carried it was dropped


async def test_connection_close_is_honoured(serve: Any, lean: LeanClient) -> None:
    server = await serve(lambda seen: Reply(answer(headers={"Connection": "close"})))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    assert (await ask.introspect("t")).active
    assert server.connections == 2
    assert [s.number for s in server.seen] == [1, 1]


async def test_cancellation_leaves_the_pool_usable(serve: Any, lean: LeanClient) -> None:
    server = await serve(lambda seen: Reply(answer(), delay=1.0 if seen.connection == 1 else 0))
    ask = introspector(server, lean)
    call = asyncio.create_task(ask.introspect("t"))
    while not server.seen:
        await asyncio.sleep(0.005)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert (await ask.introspect("t")).active
    assert (await ask.introspect("t")).active
    assert [s.connection for s in server.seen] == [1, 2, 2]
    assert "busy=0" in repr(lean)


async def test_a_closed_client_fails_closed(serve: Any) -> None:
    server = await serve(lambda seen: Reply(answer()))
    client = LeanClient()
    ask = introspector(server, client)
    assert (await ask.introspect("t")).active
    await client.aclose()
    with pytest.raises(IntrospectionUnavailable):
        await ask.introspect("t")
    await asyncio.sleep(0.05)
    assert server.open_now == 0  # the pooled connection was closed


async def test_closing_the_client_fails_a_call_in_flight_closed(serve: Any, lean: LeanClient) -> None:
    """``aclose`` during a call on a reused connection: no retry on a new connection, unavailable."""
    server = await serve(lambda seen: Reply(answer(), delay=0.3 if seen.number == 2 else 0))
    ask = introspector(server, lean)
    assert (await ask.introspect("t")).active
    call = asyncio.create_task(ask.introspect("t"))
    while len(server.seen) < 2:
        await asyncio.sleep(0.005)
    await lean.aclose()
    with pytest.raises(IntrospectionUnavailable):
        await call
    assert server.connections == 1


def test_a_client_used_from_two_event_loops_starts_afresh() -> None:
    """Connections belong to their loop (e.g. ``asyncio.run`` per call): another loop gets new ones."""
    server = Loopback(lambda seen: Reply(answer()))
    loop = asyncio.new_event_loop()  # the server's, in a thread of its own, across both runs
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(5)
    client = LeanClient()

    async def twice() -> None:
        assert (await introspector(server, client, timeout=2).introspect("t")).active
        assert (await introspector(server, client, timeout=2).introspect("t")).active

    try:
        asyncio.run(twice())
        asyncio.run(twice())
        asyncio.run(client.aclose())
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
    assert client.connects == 2
    assert [(s.connection, s.number) for s in server.seen] == [(1, 1), (1, 2), (2, 1), (2, 2)]


async def test_nothing_listening_is_unavailable() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    client = LeanClient()
    try:
        with pytest.raises(LeanHTTPError):
            await client.post(f"http://127.0.0.1:{port}/x", authorization="Bearer a", content_type="a/b",
                              body=b"", seconds=1, max_bytes=10)
    finally:
        await client.aclose()


def test_which_urls_the_lean_client_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    """https anywhere, http to loopback only (the issuer rule); an environment proxy keeps httpx."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert lean_supports("https://auth.frontdoor.example/shop-a")
    assert lean_supports("http://127.0.0.1:8000/shop-a")
    assert lean_supports("http://[::1]:8000/shop-a")
    assert not lean_supports("http://auth.frontdoor.example/shop-a")
    assert not lean_supports("https://user:pw@auth.frontdoor.example/shop-a")
    assert not lean_supports("https://auth.frontdoor.example:99999/shop-a")
    monkeypatch.setenv("https_proxy", "http://proxy.corp:3128")
    assert not lean_supports("https://auth.frontdoor.example/shop-a")
    monkeypatch.setenv("no_proxy", "localhost,.frontdoor.example")
    assert lean_supports("https://auth.frontdoor.example/shop-a")
    monkeypatch.setenv("no_proxy", "other.example")
    assert not lean_supports("https://auth.frontdoor.example/shop-a")


async def test_plain_http_elsewhere_than_loopback_is_refused() -> None:
    client = LeanClient()
    with pytest.raises(ValueError, match="loopback"):
        await client.post("http://auth.frontdoor.example/x", authorization="Bearer a", content_type="a/b",
                          body=b"", seconds=1, max_bytes=10)
    await client.aclose()


async def test_https_verifies_the_certificate(serve: Any) -> None:
    """TLS is verified: a plain-text server behind an https URL is a failure, never a downgrade."""
    server = await serve(lambda seen: Reply(answer()))
    client = LeanClient()
    try:
        with pytest.raises(LeanHTTPError):
            await client.post(f"https://localhost:{server.port}/x", authorization="Bearer a",
                              content_type="a/b", body=b"", seconds=2, max_bytes=10)
    finally:
        await client.aclose()
    assert server.seen == []  # no request was sent in the clear


@pytest.mark.parametrize("names", [("localhost",), ("elsewhere.example",)])
async def test_https_is_verified_with_sni_and_the_hostname(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                           names: tuple[str, ...]) -> None:
    """A certificate from a trusted CA for the URL's host is accepted, over SNI; one for another
    name is a failure before any request is sent (the context is httpx's: SSL_CERT_FILE is honoured)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(server_side)
    sni: list[str | None] = []
    server_side.sni_callback = lambda _sock, name, _ctx: sni.append(name)
    server = await Loopback(lambda seen: Reply(answer())).start(tls=server_side)
    client = LeanClient()
    try:
        ask = Introspector(f"https://localhost:{server.port}/shop-a/oauth/introspect", CREDENTIAL, client)
        if names == ("localhost",):
            assert (await ask.introspect("t")).active
            assert (await ask.introspect("t")).active
            assert client.connects == 1 and server.connections == 1
            assert sni == ["localhost"]
        else:
            with pytest.raises(IntrospectionUnavailable, match="could not be reached"):
                await ask.introspect("t")
            assert server.seen == []
    finally:
        await client.aclose()
        await server.stop()


# The verifier's wiring: its own client goes lean; an injected httpx client is used as is.

def _token(issuer: str, agent: Agent, key: Any) -> tuple[str, str]:
    sid = f"ses_{secrets.token_hex(8)}"
    claims = SessionTokenClaims(iss=issuer, sub=agent.user_id, aud=issuer, client_id=CLIENT_ID, sid=sid,
                                jti=secrets.token_urlsafe(16), iat=NOW, exp=NOW + 3600,
                                cnf=Confirmation(jkt=agent.jkt))
    return mint_session_token(claims, key, "k1"), sid


async def _issuer(serve: Any) -> tuple[Loopback, str, Any]:
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256", parameters={"kid": "k1"})
    box: dict[str, str] = {}

    def handle(seen: Seen) -> Reply:
        if seen.method == "GET" and seen.target == "/shop-a/jwks.json":
            return Reply(answer(body={"keys": [key.as_dict(private=False)]}))
        if seen.target == "/shop-a/oauth/introspect":
            token = parse_qs(seen.body.decode())["token"][0]
            assert token == box["token"]
            return Reply(answer(body={"active": True, "iss": box["issuer"], "client_id": CLIENT_ID,
                                      "sub": box["sub"], "sid": box["sid"], "token_type": "DPoP",
                                      "cnf": {"jkt": box["jkt"]}}))
        return Reply(answer(404, {}))

    server = await serve(handle)
    issuer = f"{server.base}/shop-a"
    agent = Agent()
    token, sid = _token(issuer, agent, key)
    box.update(token=token, issuer=issuer, sub=agent.user_id, sid=sid, jkt=agent.jkt)
    return server, issuer, (agent, token)


@pytest.mark.parametrize("injected", [False, True])
async def test_the_verifier_uses_the_lean_client_only_when_it_owns_its_client(serve: Any, injected: bool) -> None:
    import httpx

    server, issuer, (agent, token) = await _issuer(serve)
    http = httpx.AsyncClient() if injected else None
    verifier = FrontdoorVerifier(issuer, CREDENTIAL, http=http, clock=Clock())
    try:
        for _ in range(3):
            outcome = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))
            assert isinstance(outcome, Caller), outcome
    finally:
        await verifier.aclose()
        if http is not None:
            assert not http.is_closed
            await http.aclose()
    asks = [s for s in server.seen if s.target.endswith("/oauth/introspect")]
    assert len(asks) == 3
    agents = {s.headers["user-agent"].split("/")[0] for s in asks}
    assert agents == ({"python-httpx"} if injected else {"frontdoor-sdk"})
    assert len({s.connection for s in asks}) == 1  # kept alive either way


async def test_the_verifier_fails_closed_when_the_lean_call_fails(serve: Any) -> None:
    """PAP-4.9-01: no state is 503 ``temporarily_unavailable`` with Frontdoor's ``Retry-After``."""
    server, issuer, (agent, token) = await _issuer(serve)
    keys_only = server.handler

    def busy(seen: Seen) -> Reply | None:
        if seen.target.endswith("/oauth/introspect"):
            return Reply(answer(503, {"error": "busy"}, headers={"Retry-After": "3"}))
        return keys_only(seen)

    server.handler = busy
    async with FrontdoorVerifier(issuer, CREDENTIAL, clock=Clock()) as verifier:
        outcome = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))
        assert isinstance(outcome, Refusal)
        assert (outcome.status, outcome.error, outcome.headers.get("Retry-After")) == (
            503, "temporarily_unavailable", "3")
        server.handler = lambda seen: None if seen.target.endswith("/oauth/introspect") else busy(seen)
        outcome = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))
        assert isinstance(outcome, Refusal) and (outcome.status, outcome.error) == (503, "temporarily_unavailable")
