"""`SafeFetcher.pooled` (issue #13 §4): the ledger's perform webhooks reuse kept-alive
connections per origin, over the real guarded transport and a loopback server, with every
rule of `SafeFetcher.post` kept (no cookies, no redirect followed, the address rules)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from frontdoor_core.outbound import FetchError, FetchErrorCode, OutboundPolicy, SafeFetcher

pytestmark = pytest.mark.asyncio


class Server:
    """HTTP/1.1 keep-alive on loopback; counts connections, records requests."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self.answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nSet-Cookie: a=b\r\nContent-Length: 2\r\n\r\n{}"
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
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with Server() as s:
        yield s


def fetcher() -> SafeFetcher:
    return SafeFetcher(OutboundPolicy(allow_http_loopback=True, allowlist=("127.0.0.1/32",), total_timeout=5.0))


async def test_posts_to_one_origin_share_a_kept_connection(server: Server) -> None:
    pooled = fetcher().pooled()
    url = f"http://127.0.0.1:{server.port}/hook"
    try:
        for i in range(5):
            r = await pooled.post(url, b'{"n":%d}' % i, headers={"Content-Type": "application/json"}, timeout=5.0)
            assert r.status == 200 and r.body == b"{}"
        assert len(server.requests) == 5 and server.connections == 1
        # The cookie the server set is never sent back.
        assert not any(b"cookie:" in req.lower() for req in server.requests)
    finally:
        await pooled.aclose()
    # The plain fetcher opens a connection per request (nothing carried between fetches).
    plain = fetcher()
    await plain.post(url, b"{}", headers={"Content-Type": "application/json"}, timeout=5.0)
    await plain.post(url, b"{}", headers={"Content-Type": "application/json"}, timeout=5.0)
    assert server.connections == 3


async def test_origins_get_their_own_pools_and_the_oldest_is_closed(server: Server) -> None:
    async with Server() as other:
        pooled = fetcher().pooled(max_origins=1)
        try:
            for port in (server.port, other.port, server.port):
                r = await pooled.post(f"http://127.0.0.1:{port}/hook", b"{}",
                                      headers={"Content-Type": "application/json"}, timeout=5.0)
                assert r.status == 200
            # One pool kept at a time: coming back to the first origin dials again.
            assert (server.connections, other.connections) == (2, 1)
        finally:
            await pooled.aclose()


async def test_the_rules_of_post_still_apply(server: Server) -> None:
    pooled = fetcher().pooled()
    try:
        server.answer = b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/x\r\nContent-Length: 0\r\n\r\n"
        r = await pooled.post(f"http://127.0.0.1:{server.port}/hook", b"{}",
                              headers={"Content-Type": "application/json"}, timeout=5.0)
        assert r.status == 302 and len(server.requests) == 1  # returned, never followed
        with pytest.raises(FetchError) as caught:  # not on the allowlist: refused before any connection
            await pooled.post("http://10.0.0.1/hook", b"{}", headers={"Content-Type": "application/json"},
                              timeout=5.0)
        assert caught.value.code in (FetchErrorCode.BLOCKED_ADDRESS, FetchErrorCode.BAD_URL, FetchErrorCode.NOT_HTTPS)
        with pytest.raises(ValueError):
            await pooled.post(f"http://127.0.0.1:{server.port}/hook", b"{}", headers={"Cookie": "x=y"}, timeout=5.0)
    finally:
        await pooled.aclose()
