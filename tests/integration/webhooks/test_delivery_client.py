"""`DeliveryClient` (issue #13 §3): the deliverer's lean HTTP/1.1 client keeps every rule of
`SafeFetcher.post` (protocol §4.1): the URL check, addresses checked on the address actually
connected to (private, rebinding and mixed answers refused), TLS verified for the URL's
host name, no redirect followed, no cookies, one deadline, header and body caps; and
reuses kept-alive connections per origin. Against real local servers (TLS by a trustme
CA); each test asserts what reached the server as well as the outcome."""

from __future__ import annotations

import asyncio
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from frontdoor_core.outbound import FetchError, FetchErrorCode, OutboundPolicy
from frontdoor_webhooks.delivery_client import DeliveryClient
from frontdoor_webhooks.delivery_outcome import ErrorClass
from frontdoor_webhooks.sender import SafeSender, SendError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from tls_server import Route, RouteServer, json_route, redirect_route

pytestmark = pytest.mark.asyncio

BODY = b'{"type":"operation.succeeded","data":{"seq":1}}'
HEADERS = {"webhook-id": "msg_1", "webhook-timestamp": "1700000000", "webhook-signature": "v1,abc",
           "content-type": "application/json"}


class MapResolver:
    """Answers from a table; records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table[host])


class RebindingResolver:
    """Answers a public address the first time, loopback ever after."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return ["93.184.215.14"] if self.calls == 1 else ["127.0.0.1"]


def _policy(**overrides: object) -> OutboundPolicy:
    settings: dict[str, object] = {"allowlist": ("127.0.0.1/32",), "total_timeout": 1.0, "connect_timeout": 0.5}
    settings.update(overrides)
    return OutboundPolicy(**settings)  # type: ignore[arg-type]


@pytest.fixture
def server() -> Iterator[RouteServer]:
    with RouteServer(("hooks.test",)) as srv:
        srv.route("/hook", json_route(b'{"ok":true}', extra=(("Set-Cookie", "session=1"),)))
        yield srv


def _client(srv: RouteServer, policy: OutboundPolicy | None = None, resolver: object = None,
            **kwargs: object) -> DeliveryClient:
    return DeliveryClient(policy if policy is not None else _policy(),
                          resolver=resolver or MapResolver({"hooks.test": ["127.0.0.1"]}),  # type: ignore[arg-type]
                          ssl_context=srv.client_context(), **kwargs)  # type: ignore[arg-type]


async def _error(client: DeliveryClient, url: str, **kwargs: object) -> FetchError:
    with pytest.raises(FetchError) as caught:
        await client.post(url, BODY, headers=HEADERS, **kwargs)  # type: ignore[arg-type]
    return caught.value


async def test_posts_over_tls_verified_for_the_urls_host_name(server: RouteServer) -> None:
    resolver = MapResolver({"hooks.test": ["127.0.0.1"]})
    client = _client(server, resolver=resolver)
    try:
        result = await client.post(server.url("/hook"), BODY, headers=HEADERS, timeout=1.0)
    finally:
        await client.aclose()

    assert (result.status, result.body, result.truncated) == (200, b'{"ok":true}', False)
    assert result.headers["content-type"] == "application/json"
    assert result.final_url == server.url("/hook")
    # The socket went to the resolved IP; TLS (SNI and the certificate check) used the name.
    assert server.sni_names == ["hooks.test"]
    assert resolver.calls == [("hooks.test", server.port)]
    (seen,) = server.requests
    assert seen.path == "/hook"
    assert seen.header("host") == [f"hooks.test:{server.port}"]
    assert seen.header("accept-encoding") == ["identity"]
    assert seen.header("user-agent") == ["Frontdoor/0.1"]
    assert seen.header("content-length") == [str(len(BODY))]
    assert seen.header("webhook-id") == ["msg_1"] and seen.header("webhook-signature") == ["v1,abc"]
    assert seen.header("cookie") == [] and seen.header("authorization") == []


async def test_loopback_without_allowlist_is_blocked_before_connecting(server: RouteServer) -> None:
    error = await _error(_client(server, _policy(allowlist=())), server.url("/hook"))

    assert error.code == FetchErrorCode.BLOCKED_ADDRESS
    assert server.requests == [] and server.sni_names == []


async def test_private_ip_literal_is_blocked(server: RouteServer) -> None:
    error = await _error(_client(server, _policy(allowlist=())), "https://10.0.0.1/hook")

    assert error.code == FetchErrorCode.BLOCKED_ADDRESS


async def test_rebinding_answer_is_checked_on_the_address_actually_connected_to(server: RouteServer) -> None:
    resolver = RebindingResolver()
    assert await resolver.resolve("hooks.test", server.port) == ["93.184.215.14"]

    error = await _error(_client(server, _policy(allowlist=()), resolver), server.url("/hook"))

    assert error.code == FetchErrorCode.BLOCKED_ADDRESS
    assert resolver.calls == 2  # exactly one lookup by the client, at connect time
    assert server.requests == []


async def test_mixed_public_and_loopback_answers_are_refused(server: RouteServer) -> None:
    resolver = MapResolver({"hooks.test": ["8.8.8.8", "127.0.0.1"]})

    error = await _error(_client(server, _policy(allowlist=()), resolver), server.url("/hook"))

    assert error.code == FetchErrorCode.MIXED_ANSWERS
    assert server.requests == []


async def test_unresolvable_host_is_dns_error(server: RouteServer) -> None:
    error = await _error(_client(server, resolver=MapResolver({})), server.url("/hook"))

    assert error.code == FetchErrorCode.DNS_ERROR


async def test_refused_connection_is_connect_error(server: RouteServer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    error = await _error(_client(server), f"https://hooks.test:{closed_port}/hook")

    assert error.code == FetchErrorCode.CONNECT_ERROR


async def test_certificate_for_another_host_name_is_tls_error() -> None:
    with RouteServer(("other.test",)) as other:
        other.route("/hook", json_route())
        client = _client(other, resolver=MapResolver({"hooks.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}))

        error = await _error(client, other.url("/hook", host="hooks.test"))
        # Control: same server, same CA, the name on the certificate: accepted.
        result = await client.post(other.url("/hook", host="other.test"), BODY, headers=HEADERS)
        await client.aclose()

    assert error.code == FetchErrorCode.TLS_ERROR
    assert result.status == 200
    assert other.sni_names == ["hooks.test", "other.test"]
    assert [r.path for r in other.requests] == ["/hook"]


async def test_an_untrusted_ca_is_tls_error_and_a_non_verifying_context_is_refused(server: RouteServer) -> None:
    client = DeliveryClient(_policy(), resolver=MapResolver({"hooks.test": ["127.0.0.1"]}))  # system CAs only

    error = await _error(client, server.url("/hook"))

    assert error.code == FetchErrorCode.TLS_ERROR
    assert server.requests == []
    lax = ssl.create_default_context()
    lax.check_hostname = False
    lax.verify_mode = ssl.CERT_NONE
    with pytest.raises(ValueError):
        DeliveryClient(_policy(), ssl_context=lax)


async def test_plain_http_is_refused_except_to_loopback_in_development(server: RouteServer) -> None:
    error = await _error(_client(server), "http://hooks.test/hook")
    assert error.code == FetchErrorCode.NOT_HTTPS
    error = await _error(_client(server), "http://127.0.0.1:9/hook")  # loopback, but not development mode
    assert error.code == FetchErrorCode.NOT_HTTPS


async def test_a_redirect_is_returned_never_followed(server: RouteServer) -> None:
    server.route("/moved", redirect_route(server.url("/hook")))

    result = await _client(server).post(server.url("/moved"), BODY, headers=HEADERS)

    assert result.status == 302 and result.headers["location"] == server.url("/hook")
    assert [r.path for r in server.requests] == ["/moved"]


async def test_a_slow_trickle_is_abandoned_at_the_deadline(server: RouteServer) -> None:
    server.route("/slow", Route(body=b"x" * 200, trickle_delay=0.05))  # 10 s in all

    started = time.monotonic()
    error = await _error(_client(server, _policy(total_timeout=5.0)), server.url("/slow"), timeout=1.0)
    elapsed = time.monotonic() - started

    assert error.code == FetchErrorCode.TIMEOUT
    assert 0.9 <= elapsed < 2.0


async def test_a_body_over_the_cap_is_cut_and_one_at_the_cap_is_whole(server: RouteServer) -> None:
    server.route("/big", Route(body=b"x" * 1024, repeat=200))
    server.route("/endless", Route(body=b"y" * 16384, repeat=100_000, chunked=True))  # 1.6 GB
    server.route("/exact", Route(body=b"z" * 1000))
    server.route("/chunked", Route(body=b"abc", repeat=5, chunked=True))
    client = _client(server, _policy(total_timeout=5.0))

    big = await client.post(server.url("/big"), BODY, headers=HEADERS, max_bytes=5000)
    started = time.monotonic()
    endless = await client.post(server.url("/endless"), BODY, headers=HEADERS, max_bytes=50_000)
    assert time.monotonic() - started < 2.0
    exact = await client.post(server.url("/exact"), BODY, headers=HEADERS, max_bytes=1000)
    chunked = await client.post(server.url("/chunked"), BODY, headers=HEADERS, max_bytes=1000)

    assert (big.body, big.truncated) == (b"x" * 5000, True)
    assert (endless.body, endless.truncated) == (b"y" * 50_000, True)
    assert (exact.body, exact.truncated) == (b"z" * 1000, False)
    assert (chunked.body, chunked.truncated) == (b"abc" * 5, False)


async def test_a_content_coding_is_never_decoded(server: RouteServer) -> None:
    server.route("/gz", Route(headers=(("Content-Type", "application/json"), ("Content-Encoding", "gzip")),
                              body=b"\x1f\x8b" + b"\x00" * 30))

    result = await _client(server).post(server.url("/gz"), BODY, headers=HEADERS)

    assert (result.status, result.body, result.truncated) == (200, b"", True)


async def test_a_header_block_over_the_cap_is_too_large(server: RouteServer) -> None:
    server.route("/fat", Route(headers=tuple(("X-Pad", "p" * 1000) for _ in range(20))))

    error = await _error(_client(server, _policy(max_header_bytes=8192)), server.url("/fat"))

    assert error.code == FetchErrorCode.TOO_LARGE


async def test_reserved_and_splitting_headers_are_refused_before_sending(server: RouteServer) -> None:
    client = _client(server)
    for name in ("Host", "Cookie", "content-length", "Transfer-Encoding", "Connection", "Accept-Encoding"):
        with pytest.raises(ValueError):
            await client.post(server.url("/hook"), BODY, headers={**HEADERS, name: "x"})
    for bad in ({"webhook-id": "msg_1\r\nX-Injected: 1"}, {"bad name": "x"}, {"webhook-id": "m\n"}):
        with pytest.raises(FetchError) as caught:
            await client.post(server.url("/hook"), BODY, headers={**HEADERS, **bad})
        assert caught.value.code == FetchErrorCode.HTTP_ERROR
    assert server.requests == []


# -- keep-alive --------------------------------------------------------------------------


class KeepAliveServer:
    """Plain HTTP/1.1 keep-alive on loopback; counts connections, records requests."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed = 0
        self.requests: list[bytes] = []
        self.answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: a=b\r\n"
                       b"Content-Length: 2\r\n\r\n{}")
        self.port = 0
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.requests.append(head + await reader.readexactly(length))
                writer.write(self.answer)
                await writer.drain()
                if b"connection: close" in self.answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            writer.close()

    async def __aenter__(self) -> KeepAliveServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def plain() -> AsyncIterator[KeepAliveServer]:
    async with KeepAliveServer() as s:
        yield s


def _dev_client(**kwargs: object) -> DeliveryClient:
    return DeliveryClient(OutboundPolicy(allow_http_loopback=True, allowlist=("127.0.0.1/32",), total_timeout=5.0),
                          **kwargs)  # type: ignore[arg-type]


async def test_posts_to_one_origin_share_a_kept_connection_and_never_send_cookies(plain: KeepAliveServer) -> None:
    client = _dev_client()
    try:
        for i in range(5):
            r = await client.post(plain.url(), b'{"n":%d}' % i, headers={"Content-Type": "application/json"})
            assert (r.status, r.body) == (200, b"{}")
    finally:
        await client.aclose()

    assert len(plain.requests) == 5 and plain.connections == 1
    assert plain.requests[3].endswith(b'{"n":3}')
    assert not any(b"cookie:" in req.lower() for req in plain.requests)


async def test_concurrent_posts_open_at_most_max_connections(plain: KeepAliveServer) -> None:
    client = _dev_client(max_connections=3)
    try:
        results = await asyncio.gather(*(client.post(plain.url(), b"{}", headers={}) for _ in range(12)))
    finally:
        await client.aclose()

    assert [r.status for r in results] == [200] * 12
    assert plain.connections <= 3 and len(plain.requests) == 12


async def test_idle_connections_expire_and_a_closed_one_is_not_reused(plain: KeepAliveServer) -> None:
    client = _dev_client(keepalive_expiry=0.3)
    try:
        await client.post(plain.url(), b"{}", headers={})
        await asyncio.sleep(0.15)
        await client.post(plain.url(), b"{}", headers={})
        await asyncio.sleep(0.2)  # past the first use's expiry, within the second's
        await client.post(plain.url(), b"{}", headers={})
        assert plain.connections == 1
        await asyncio.sleep(0.5)
        assert plain.closed == 1  # the idle connection was closed at its expiry, not merely left
        await client.post(plain.url(), b"{}", headers={})
        assert plain.connections == 2
        plain.answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
        await client.post(plain.url(), b"{}", headers={})  # answered on the kept one, which then closes
        await client.post(plain.url(), b"{}", headers={})
    finally:
        await client.aclose()

    assert plain.connections == 3 and len(plain.requests) == 6


class ChattyServer(KeepAliveServer):
    """Answers, then (once told) writes unasked bytes on the idle connection; sees the client close it."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        self.unasked = 0
        self.extra = b""  # written right after the answer (past its end)
        self.writers: list[asyncio.StreamWriter] = []
        self.eof = asyncio.Event()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.requests.append(head + await reader.readexactly(length))
                writer.write(self.answer + self.extra)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            self.eof.set()
            writer.close()

    async def send_unasked(self, data: bytes) -> None:
        writer = self.writers[-1]
        writer.write(data)
        await writer.drain()
        self.unasked += len(data)


async def test_an_idle_connection_that_receives_a_byte_is_closed_at_once_and_never_reused() -> None:
    async with ChattyServer() as chatty:
        client = _dev_client(keepalive_expiry=30.0)  # the expiry plays no part
        try:
            assert (await client.post(chatty.url(), b"{}", headers={})).status == 200
            await chatty.send_unasked(b"x" * 200_000)  # not one byte was asked for
            await asyncio.wait_for(chatty.eof.wait(), 5.0)  # the client closed it, long before its expiry
            assert chatty.closed == 1
            kept = [conn for origin in client._origins.values() for pool in origin.pools.values()
                    for conn in pool.idle]
            assert all(not conn.buffer for conn in kept)  # nothing of it was stored
            answer = await client.post(chatty.url(), b"{}", headers={})
            assert (answer.status, answer.body) == (200, b"{}")
            assert chatty.connections == 2  # a new connection, the closed one never reused
        finally:
            await client.aclose()


async def test_bytes_past_the_end_of_an_answer_mean_the_connection_is_not_kept() -> None:
    async with ChattyServer() as chatty:
        chatty.extra = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfalse"  # an unasked second answer
        client = _dev_client(keepalive_expiry=30.0)
        try:
            assert (await client.post(chatty.url(), b"{}", headers={})).body == b"{}"
            await asyncio.wait_for(chatty.eof.wait(), 5.0)
            chatty.extra = b""
            assert (await client.post(chatty.url(), b"{}", headers={})).body == b"{}"  # never "false"
        finally:
            await client.aclose()

    assert chatty.connections == 2


async def test_origins_get_their_own_connections_and_the_oldest_is_closed(plain: KeepAliveServer) -> None:
    async with KeepAliveServer() as other:
        client = _dev_client(max_origins=1)
        try:
            for url in (plain.url(), other.url(), plain.url()):
                assert (await client.post(url, b"{}", headers={})).status == 200
        finally:
            await client.aclose()

    assert (plain.connections, other.connections) == (2, 1)


async def test_a_server_closing_before_it_answers_is_an_error_and_the_connection_is_dropped(
        plain: KeepAliveServer) -> None:
    client = _dev_client()
    try:
        plain.answer = b""  # reads the request, says nothing, and keeps the connection
        with pytest.raises(FetchError) as caught:
            await client.post(plain.url(), b"{}", headers={}, timeout=0.3)
        assert caught.value.code == FetchErrorCode.TIMEOUT
        plain.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
        assert (await client.post(plain.url(), b"{}", headers={})).status == 200
    finally:
        await client.aclose()

    assert plain.connections == 2  # the timed-out connection was never reused


async def test_malformed_answers_are_http_errors(plain: KeepAliveServer) -> None:
    client = _dev_client()
    try:
        for answer in (b"NONSENSE\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\n bad fold\r\n\r\n",
                       # a non-ASCII digit, and more digits than int() takes: refused, never a crash
                       b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n",  # latin-1 '\u00b2': str.isdigit() is True
                       b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
                       # both framings (RFC 9112 \u00a76.1): refused, the connection never reused
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
                       # chunk sizes only in hex digits
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n",
                       # a status below 100 is not an answer
                       b"HTTP/1.1 042 Odd\r\nContent-Length: 0\r\n\r\n"):
            plain.answer = answer
            with pytest.raises(FetchError) as caught:
                await client.post(plain.url(), b"{}", headers={})
            assert caught.value.code == FetchErrorCode.HTTP_ERROR, answer
    finally:
        await client.aclose()


async def test_interim_answers_are_skipped(plain: KeepAliveServer) -> None:
    plain.answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n"
    client = _dev_client()
    try:
        assert (await client.post(plain.url(), b"{}", headers={})).status == 410
    finally:
        await client.aclose()


class HoldingServer(KeepAliveServer):
    """A slow shared webhook host: answers to ``/a`` are held until a request to ``/b`` arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.b_arrived = asyncio.Event()
        self.held = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.requests.append(head + await reader.readexactly(length))
                if head.startswith(b"POST /a "):
                    self.held += 1
                    await self.b_arrived.wait()
                    self.held -= 1
                else:
                    self.b_arrived.set()
                writer.write(self.answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed += 1
            writer.close()


async def _until(predicate: object, limit: float = 5.0) -> None:
    async with asyncio.timeout(limit):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_a_tenant_holding_its_share_of_an_origin_does_not_delay_another_tenant() -> None:
    async with HoldingServer() as slow:
        client = _dev_client(max_connections=2)
        a = SafeSender(client).partitioned("ten_a")
        b = SafeSender(client).partitioned("ten_b")
        try:
            # Tenant A: two endpoints on the shared host, more POSTs than its share.
            held = [asyncio.create_task(a.post(slow.url("/a"), b"{}", {}, 5.0)) for _ in range(4)]
            await _until(lambda: slow.held == 2)  # A has its whole share, held open by the server
            answer = await b.post(slow.url("/b"), b"{}", {}, 5.0)
            # B was answered while every A POST still waited: the server holds A's until B's came.
            assert answer.status == 200 and not any(task.done() for task in held)
            assert [r.status for r in await asyncio.gather(*held)] == [200] * 4
            assert (await b.post(slow.url("/b"), b"{}", {}, 5.0)).status == 200
        finally:
            await client.aclose()

    assert len(slow.requests) == 6
    # A's share (2) and B's own (1); A's last two and B's second reused their partition's.
    assert slow.connections == 3


async def test_without_a_partition_posts_share_one_pool_as_before() -> None:
    async with HoldingServer() as slow:
        client = _dev_client(max_connections=2)
        try:
            held = [asyncio.create_task(client.post(slow.url("/a"), b"{}", headers={})) for _ in range(2)]
            await _until(lambda: slow.held == 2)
            error = await _error(client, slow.url("/b"), timeout=0.3)  # waits for a slot the whole deadline
            assert error.code == FetchErrorCode.TIMEOUT and not slow.b_arrived.is_set()
            slow.b_arrived.set()
            assert [r.status for r in await asyncio.gather(*held)] == [200] * 2
        finally:
            await client.aclose()


async def test_partitions_share_the_origins_cap() -> None:
    async with HoldingServer() as slow:
        client = _dev_client(max_connections=2, max_origin_connections=3)
        try:
            held = [asyncio.create_task(client.post(slow.url("/a"), b"{}", headers={}, partition=tenant))
                    for tenant in ("ten_a", "ten_a", "ten_b", "ten_b", "ten_c")]
            await _until(lambda: slow.held == 3)
            await asyncio.sleep(0.1)  # a fourth connection would have been opened by now
            assert slow.connections == 3 and slow.held == 3
            slow.b_arrived.set()
            assert [r.status for r in await asyncio.gather(*held)] == [200] * 5
        finally:
            await client.aclose()

    assert len(slow.requests) == 5


async def test_safe_sender_over_the_client_maps_failures_to_attempt_error_classes(server: RouteServer) -> None:
    server.route("/slow", Route(body=b"x" * 200, trickle_delay=0.05))
    sender = SafeSender(_client(server, _policy(total_timeout=5.0)))
    blocked = SafeSender(_client(server, _policy(allowlist=())))

    answer = await sender.post(server.url("/hook"), BODY, HEADERS, 1.0)
    with pytest.raises(SendError) as timeout:
        await sender.post(server.url("/slow"), BODY, HEADERS, 0.5)
    with pytest.raises(SendError) as refused:
        await blocked.post(server.url("/hook"), BODY, HEADERS, 1.0)

    assert (answer.status, answer.body) == (200, b'{"ok":true}')
    assert timeout.value.error_class is ErrorClass.TIMEOUT
    assert refused.value.error_class is ErrorClass.BLOCKED_ADDRESS


class _PlaintextThenTLS:
    """A hostile origin: writes a forged plaintext answer, then completes a genuine TLS handshake
    (with a certificate the client trusts) and answers nothing inside TLS."""

    FORGED = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nFORGED"

    def __init__(self, ca: object) -> None:
        import threading

        import trustme

        assert isinstance(ca, trustme.CA)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("hooks.test").configure_cert(self._context)
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            raw, _ = self._listener.accept()
        except OSError:
            return
        with raw:
            raw.sendall(self.FORGED)
            try:
                with self._context.wrap_socket(raw, server_side=True) as tls:
                    tls.settimeout(2.0)
                    tls.recv(65536)  # the request, if the client sent one; never answered
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_bytes_sent_before_the_tls_handshake_are_never_read_as_the_answer(server: RouteServer, loop_kind: str) -> None:
    """Under uvloop (granian's loop for the ledger) the plaintext bytes reached the protocol:
    they were parsed as a ``200 FORGED`` answer to an https POST."""
    hostile = _PlaintextThenTLS(server.ca)

    async def attempt() -> FetchError:
        client = DeliveryClient(_policy(), resolver=MapResolver({"hooks.test": ["127.0.0.1"]}),  # type: ignore[arg-type]
                                ssl_context=server.client_context())
        try:
            with pytest.raises(FetchError) as caught:
                await client.post(f"https://hooks.test:{hostile.port}/hook", BODY, headers=HEADERS, timeout=1.0)
            return caught.value
        finally:
            await client.aclose()

    try:
        if loop_kind == "uvloop":
            import uvloop

            error = uvloop.run(attempt())
        else:
            error = asyncio.run(attempt())
    finally:
        hostile.close()
    assert error.code == FetchErrorCode.TLS_ERROR, error
