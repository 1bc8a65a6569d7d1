"""The deliverer's HTTP client: one signed POST per attempt over kept-alive HTTP/1.1 connections.

`SafeFetcher.pooled` (httpx over httpcore and anyio) spent most of a delivery's CPU on
machinery a webhook POST does not use: a client, a request and a response object per
attempt, a connection-pool scan that asks every kept socket whether it is readable, two
writes per request. `DeliveryClient` sends the same request in one write on an asyncio
protocol and reads the answer with a small HTTP/1.1 parser, and keeps every rule of
`SafeFetcher.post` (protocol §4.1), most of them by calling the same code:

- the URL is checked by `frontdoor_core.outbound.check_target` (HTTPS only, save the
  development loopback exception; no user information, no odd host forms);
- every connection is opened by `frontdoor_core.outbound.GuardedNetworkBackend`: the
  name is resolved once, every answer checked against the `AddressRules` (private and
  mixed answers refused), and the checked IP literal dialled, so a rebinding answer never
  reaches a socket;
- TLS verifies the certificate and the URL's host name (`strict_ssl_context`), SNI the
  URL's host;
- no redirect is followed (a ``3xx`` is returned like any status); no cookie is kept or
  sent; no proxy; ``Accept-Encoding: identity`` and a body that arrives with a content
  coding anyway is dropped (``truncated``), never decoded;
- one deadline covers the attempt (pool wait, connect, TLS, request, every byte of the
  answer); the connect and TLS handshake together are bounded by the policy's
  ``connect_timeout``;
- the response's header block is capped at ``max_header_bytes`` (``too_large``), its
  body cut at ``max_bytes`` (``truncated``);
- the caller may not set ``Host``, ``Content-Length``, ``Transfer-Encoding``,
  ``Connection``, ``Accept-Encoding``, ``Cookie`` or ``Proxy-Authorization``, nor any
  header whose name or value could split the request.

Connections are kept per origin (scheme, host, port), never shared between origins, and
within an origin per *partition*: the caller's ``partition=`` (the deliverer and the ledger
pass the tenant), never shared between partitions either. At most ``max_connections`` are
open at once for one partition of an origin and ``max_origin_connections`` (higher) for
the whole origin, so one tenant can never take every connection to a shared webhook host
(a relay answering slowly, say) and make another tenant's deliveries wait out their
deadline for a slot. Without a partition every POST shares one, as one pool per origin
did. An idle one is closed after ``keepalive_expiry`` seconds, as soon as the server
closes it, or as soon as any byte arrives on it (nothing was asked: the bytes are dropped,
never buffered, and the connection never reused); at most ``max_origins`` origins are kept (the least
recently used is closed). A connection whose answer was not read to its end (cut, a
content coding, a timeout, an error) is closed, never reused.

Failures raise `FetchError` with the codes `SafeFetcher.post` uses, so `SafeSender` maps
them to the same attempt error classes.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Final

import httpcore
import httpx
from frontdoor_core.outbound import (
    AddressRules,
    FetchError,
    FetchErrorCode,
    FetchResult,
    GuardedNetworkBackend,
    OutboundPolicy,
    Resolver,
    SystemResolver,
    check_target,
    strict_ssl_context,
)

__all__ = ["DeliveryClient"]

_RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection", "accept-encoding", "cookie",
                       "proxy-authorization"})
_TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_NO_BODY: Final = frozenset({204, 304})
_DECIMAL: Final = re.compile(r"[0-9]{1,18}")
_CHUNK_SIZE: Final = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CHUNK_LINE_LIMIT: Final = 1024
_READ_HIGH_WATER: Final = 256 * 1024
_TARGETS_KEPT: Final = 4096


class _Conn(asyncio.Protocol):
    """One connection: bytes received so far, and whether the server has closed it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self.idle = False  # kept, waiting for a request: any byte now closes it
        self.timed = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drained: asyncio.Future[None] | None = None

    # -- asyncio.Protocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.idle:
            # Nothing was asked: the bytes are never kept (a server could otherwise pin up
            # to the read high water per idle socket until its expiry) and the connection
            # is closed at once, never reused.
            self.close()
            return
        self.buffer += data
        if len(self.buffer) > _READ_HIGH_WATER and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- used by the client ---------------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait_data(self) -> None:
        """Wait until more bytes came or the connection closed (the caller's deadline bounds it)."""
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def take(self, n: int) -> bytes:
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    async def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)
        if self._drained is not None:
            await self._drained

    def reusable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Stream(httpcore.AsyncNetworkStream):
    """What `_Backend` hands `GuardedNetworkBackend`: the connection's protocol, for the client."""

    def __init__(self, conn: _Conn) -> None:
        self.conn = conn

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        raise NotImplementedError  # the client reads the protocol's buffer itself

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self.conn.send(buffer)

    async def aclose(self) -> None:
        self.conn.close()

    def get_extra_info(self, info: str) -> Any:
        return None if self.conn.transport is None else self.conn.transport.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    """Opens a TCP connection to an IP literal `GuardedNetworkBackend` has already checked."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(_Conn, host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout("connect timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        return _Stream(conn)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise FetchError(FetchErrorCode.BLOCKED_ADDRESS, "unix sockets are refused")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Pool:
    """One partition's connections to an origin: the kept ones, and its share of the slots."""

    __slots__ = ("idle", "slots", "users")

    def __init__(self, max_connections: int) -> None:
        self.idle: list[_Conn] = []
        self.slots = asyncio.Semaphore(max_connections)
        self.users = 0  # POSTs holding or waiting for one of its slots


class _Origin:
    """The connections of one origin: a pool per partition, under one cap for the origin."""

    def __init__(self, max_connections: int, max_origin_connections: int) -> None:
        self.pools: dict[Hashable, _Pool] = {}
        self.slots = asyncio.Semaphore(max_origin_connections)
        self.max_connections = max_connections
        self.evicted = False

    def pool(self, partition: Hashable) -> _Pool:
        pool = self.pools.get(partition)
        if pool is None:
            pool = self.pools[partition] = _Pool(self.max_connections)
        return pool

    def forget(self, partition: Hashable, pool: _Pool) -> None:
        """Drop a partition's pool once nothing uses or is kept in it (partitions come and go)."""
        if pool.users == 0 and not pool.idle and self.pools.get(partition) is pool:
            del self.pools[partition]

    def close_idle(self) -> None:
        for pool in self.pools.values():
            for conn in pool.idle:
                conn.close()
            pool.idle.clear()


class _Target:
    """A URL `check_target` accepted, in the parts a request needs."""

    __slots__ = ("origin", "request_line", "url")

    def __init__(self, checked: httpx.URL) -> None:
        self.url = str(checked)
        host = checked.raw_host.decode("ascii")
        self.origin = (checked.scheme, host, checked.port or (443 if checked.scheme == "https" else 80))
        self.request_line = b"".join((b"POST ", checked.raw_path, b" HTTP/1.1\r\nHost: ", checked.netloc, b"\r\n"))


class _Protocol(Exception):
    """The answer broke HTTP/1.1 framing."""


def _is_tls_failure(exc: BaseException) -> bool:
    return isinstance(exc, ssl.SSLError | ssl.CertificateError)


class DeliveryClient:
    """POSTs deliveries under `SafeFetcher.post`'s rules over kept-alive connections (see the module).

    Args:
        policy: The outbound policy (`frontdoor_dispatcher.worker_runtime.delivery_outbound_policy`).
        resolver: Name resolution; the system resolver when None.
        ssl_context: A verifying TLS context (tests pass one trusting their CA).
        max_origins: Origins whose connections are kept.
        max_connections: Connections open at once to one origin for one partition.
        max_origin_connections: Connections open at once to one origin in all (at least
            ``max_connections``; default four times it).
        keepalive_expiry: Seconds an idle connection is kept.

    Raises:
        ValueError: The policy's allowlist is malformed or ``ssl_context`` does not
            verify certificates and host names.
    """

    def __init__(self, policy: OutboundPolicy | None = None, *, resolver: Resolver | None = None,
                 ssl_context: ssl.SSLContext | None = None, max_origins: int = 256, max_connections: int = 32,
                 max_origin_connections: int | None = None, keepalive_expiry: float = 4.0) -> None:
        self._policy = policy if policy is not None else OutboundPolicy()
        self._rules = AddressRules(self._policy)
        self._backend = GuardedNetworkBackend(self._rules, resolver if resolver is not None else SystemResolver(),
                                              inner=_Backend())
        self._ssl_context = strict_ssl_context(ssl_context)
        self._max_origins = max(max_origins, 1)
        self._max_connections = max(max_connections, 1)
        self._max_origin_connections = max(self._max_connections, max_origin_connections
                                           if max_origin_connections is not None else 4 * self._max_connections)
        self._keepalive = keepalive_expiry
        self._origins: OrderedDict[tuple[str, str, int], _Origin] = OrderedDict()
        self._targets: dict[str, _Target] = {}
        self._fixed = (f"User-Agent: {self._policy.user_agent}\r\nAccept: */*\r\n"
                       "Accept-Encoding: identity\r\n").encode("latin-1")

    @property
    def policy(self) -> OutboundPolicy:
        """The policy this client enforces."""
        return self._policy

    async def post(self, url: str, body: bytes, *, headers: Mapping[str, str], timeout: float | None = None,  # noqa: ASYNC109
                   max_bytes: int | None = None, partition: Hashable = None) -> FetchResult:
        """POST ``body`` to ``url`` once; the answer whatever its status (as `SafeFetcher.post`).

        ``partition`` (the tenant, say) keeps this POST's connection apart from other
        partitions' and takes one of that partition's ``max_connections`` slots of the
        origin; None is one partition like any other.

        Raises:
            ValueError: A reserved header was given.
            FetchError: With one of the `FetchErrorCode` codes (never ``bad_status``).
        """
        reserved = sorted(name for name in headers if name.lower() in _RESERVED)
        if reserved:
            raise ValueError(f"headers {reserved} are set by the fetcher")
        deadline = self._policy.total_timeout if timeout is None else timeout
        limit = self._policy.max_bytes if max_bytes is None else max_bytes
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline):
                target = self._target(url)
                request = self._request(target, body, headers)
                return await self._exchange(target, request, limit, deadline, started, partition=partition)
        except TimeoutError:
            raise FetchError(FetchErrorCode.TIMEOUT, f"request exceeded {deadline:g} s") from None

    def _target(self, url: str) -> _Target:
        """``url`` checked by `check_target` (its verdict on a URL never changes, so it is kept)."""
        target = self._targets.get(url)
        if target is None:
            checked = check_target(url, self._rules, allow_http_loopback=self._policy.allow_http_loopback,
                                   redirect=False)
            target = _Target(checked)
            if len(self._targets) >= _TARGETS_KEPT:
                del self._targets[next(iter(self._targets))]
            self._targets[url] = target
        return target

    def _request(self, target: _Target, body: bytes, headers: Mapping[str, str]) -> bytes:
        lines = [target.request_line, self._fixed]
        for name, value in headers.items():
            try:
                n, v = name.encode("latin-1"), value.encode("latin-1")
            except UnicodeEncodeError:
                raise FetchError(FetchErrorCode.HTTP_ERROR, f"invalid request header {name!r}") from None
            if not _TOKEN.match(n) or _BAD_VALUE.search(v):
                raise FetchError(FetchErrorCode.HTTP_ERROR, f"invalid request header {name!r}")
            lines += (n, b": ", v.strip(b" \t"), b"\r\n")
        lines += (b"Content-Length: ", str(len(body)).encode(), b"\r\n\r\n", body)
        return b"".join(lines)

    async def _exchange(self, target: _Target, request: bytes, limit: int, deadline: float,
                        started: float, *, partition: Hashable) -> FetchResult:
        key = target.origin
        scheme, host, port = key
        origin = self._origins.get(key)
        if origin is None:
            origin = self._origins[key] = _Origin(self._max_connections, self._max_origin_connections)
            self._evict()
        else:
            self._origins.move_to_end(key)
        pool = origin.pool(partition)
        pool.users += 1
        try:
            # The partition's share first, then the origin's: a partition at its share
            # waits on its own semaphore, never holding one of the origin's slots.
            async with pool.slots, origin.slots:
                conn = None
                done = False
                try:
                    conn = self._idle(pool)
                    if conn is None:
                        conn = await self._connect(scheme, host, port, deadline)
                    await conn.send(request)
                    status, headers, data, truncated, keep = await self._response(conn, limit)
                    done = keep
                except _Protocol as exc:
                    raise FetchError(FetchErrorCode.HTTP_ERROR, f"RemoteProtocolError: {exc}") from None
                finally:
                    if conn is not None:
                        if done and not origin.evicted and conn.reusable():
                            self._keep(origin, partition, pool, conn)
                        else:
                            conn.close()
        finally:
            pool.users -= 1
            origin.forget(partition, pool)
        return FetchResult(final_url=target.url, status=status, headers=headers, body=data,
                           redirect_chain=(target.url,), elapsed=time.monotonic() - started, truncated=truncated)

    def _idle(self, pool: _Pool) -> _Conn | None:
        now = time.monotonic()
        while pool.idle:
            conn = pool.idle.pop()
            conn.idle = False
            if conn.reusable() and now - conn.idle_since < self._keepalive and not conn.buffer:
                return conn
            conn.close()
        return None

    def _keep(self, origin: _Origin, partition: Hashable, pool: _Pool, conn: _Conn) -> None:
        if conn.buffer:  # bytes past the answer's end: not a connection to reuse
            conn.close()
            return
        conn.idle = True
        conn.idle_since = time.monotonic()
        pool.idle.append(conn)
        if not conn.timed:  # one expiry timer per connection, not one per request
            conn.timed = True
            asyncio.get_running_loop().call_later(self._keepalive, self._expire, origin, partition, pool, conn)

    def _expire(self, origin: _Origin, partition: Hashable, pool: _Pool, conn: _Conn) -> None:
        conn.timed = False
        if conn not in pool.idle:
            return  # in use or closed; kept again, it gets a new timer
        left = conn.idle_since + self._keepalive - time.monotonic()
        if left > 0:  # used and kept again since this timer was set
            conn.timed = True
            asyncio.get_running_loop().call_later(left, self._expire, origin, partition, pool, conn)
            return
        pool.idle.remove(conn)
        conn.close()
        origin.forget(partition, pool)

    def _evict(self) -> None:
        while len(self._origins) > self._max_origins:
            _, old = self._origins.popitem(last=False)
            old.evicted = True
            old.close_idle()

    async def _connect(self, scheme: str, host: str, port: int, deadline: float) -> _Conn:
        connect = min(self._policy.connect_timeout, deadline)
        conn: _Conn | None = None
        try:
            async with asyncio.timeout(connect):
                stream = await self._backend.connect_tcp(host, port, timeout=connect)
                assert isinstance(stream, _Stream)
                conn = stream.conn
                if scheme == "https":
                    assert conn.transport is not None
                    loop = asyncio.get_running_loop()
                    tls = await loop.start_tls(conn.transport, conn, self._ssl_context, server_hostname=host)
                    if tls is None:
                        raise FetchError(FetchErrorCode.TLS_ERROR, "TLS handshake failed (connection closed)")
                    conn.transport = tls
                    if conn.buffer:
                        # Bytes the server (or anyone on the path) sent before or during the
                        # handshake reached the protocol unencrypted (uvloop hands them over):
                        # they must never be read as the answer.
                        raise FetchError(FetchErrorCode.TLS_ERROR, "bytes arrived outside TLS")
        except TimeoutError:
            if conn is not None:
                conn.close()
            raise FetchError(FetchErrorCode.TIMEOUT, "timed out") from None
        except httpcore.ConnectTimeout:
            raise FetchError(FetchErrorCode.TIMEOUT, "timed out") from None
        except httpcore.ConnectError as exc:
            raise FetchError(FetchErrorCode.CONNECT_ERROR, f"connection failed ({exc})") from None
        except (ssl.SSLError, ssl.CertificateError) as exc:
            if conn is not None:
                conn.close()
            raise FetchError(FetchErrorCode.TLS_ERROR, f"TLS handshake failed ({exc})") from None
        except OSError as exc:
            if conn is not None:
                conn.close()
            raise FetchError(FetchErrorCode.CONNECT_ERROR, f"connection failed ({exc})") from None
        return conn

    # -- reading the answer ---------------------------------------------------------

    async def _head(self, conn: _Conn) -> bytes:
        cap = self._policy.max_header_bytes
        while True:
            end = conn.buffer.find(b"\r\n\r\n")
            if end >= 0:
                if end > cap:
                    raise FetchError(FetchErrorCode.TOO_LARGE, "response headers too large")
                return conn.take(end + 4)[:-4]
            if len(conn.buffer) > cap:
                raise FetchError(FetchErrorCode.TOO_LARGE, "response headers too large")
            if conn.closed:
                if conn.error is not None and _is_tls_failure(conn.error):
                    raise FetchError(FetchErrorCode.TLS_ERROR, f"TLS failed ({conn.error})")
                raise _Protocol("Server disconnected without sending a response" if not conn.buffer
                                else "incomplete response head")
            await conn.wait_data()

    async def _response(self, conn: _Conn, limit: int) -> tuple[int, dict[str, str], bytes, bool, bool]:
        while True:
            head = await self._head(conn)
            status, version, headers = _parse_head(head)
            if 100 <= status < 200:
                if status == 101:
                    raise _Protocol("unexpected 101 Switching Protocols")
                continue  # an interim answer: the final one follows
            break
        keep = version == b"HTTP/1.1" and "close" not in _tokens(headers.get("connection", ""))
        codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
        if any(c not in ("", "identity") for c in codings):
            return status, headers, b"", True, False  # never decoded; the connection is dropped
        if status in _NO_BODY:
            return status, headers, b"", False, keep
        te = headers.get("transfer-encoding")
        if te is not None and "content-length" in headers:
            raise _Protocol("both Transfer-Encoding and Content-Length")  # RFC 9112 §6.1: never reused
        if te is not None:
            if _tokens(te) != ["chunked"]:
                raise _Protocol(f"unsupported transfer-encoding {te!r}")
            data, truncated = await self._chunked(conn, limit)
            return status, headers, data, truncated, keep and not truncated
        length = headers.get("content-length")
        if length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not _DECIMAL.fullmatch(next(iter(values))):
                raise _Protocol("invalid Content-Length")
            size = int(next(iter(values)))
            data, truncated = await self._exact(conn, size, limit)
            return status, headers, data, truncated, keep and not truncated
        data, truncated = await self._until_close(conn, limit)
        return status, headers, data, truncated, False

    async def _exact(self, conn: _Conn, size: int, limit: int) -> tuple[bytes, bool]:
        want = min(size, limit + 1)
        while len(conn.buffer) < want:
            if conn.closed:
                raise _Protocol("peer closed connection without sending complete message body")
            await conn.wait_data()
        if size > limit:
            return conn.take(limit), True
        return conn.take(size), False

    async def _until_close(self, conn: _Conn, limit: int) -> tuple[bytes, bool]:
        while not conn.closed and len(conn.buffer) <= limit:
            await conn.wait_data()
        if len(conn.buffer) > limit:
            return conn.take(limit), True
        return conn.take(len(conn.buffer)), False

    async def _line(self, conn: _Conn) -> bytes:
        while True:
            end = conn.buffer.find(b"\r\n")
            if end >= 0:
                if end > _CHUNK_LINE_LIMIT:
                    raise _Protocol("chunk header too long")
                return conn.take(end + 2)[:-2]
            if len(conn.buffer) > _CHUNK_LINE_LIMIT:
                raise _Protocol("chunk header too long")
            if conn.closed:
                raise _Protocol("peer closed connection without sending complete message body")
            await conn.wait_data()

    async def _chunked(self, conn: _Conn, limit: int) -> tuple[bytes, bool]:
        body = bytearray()
        while True:
            size_text = (await self._line(conn)).split(b";", 1)[0].strip(b" \t")
            if not _CHUNK_SIZE.fullmatch(size_text):
                raise _Protocol("invalid chunk size")
            size = int(size_text, 16)
            if size == 0:
                trailer = 0
                while (line := await self._line(conn)) != b"":
                    trailer += len(line) + 2
                    if trailer > self._policy.max_header_bytes:
                        raise FetchError(FetchErrorCode.TOO_LARGE, "response headers too large")
                return bytes(body), False
            part, cut = await self._exact(conn, size, limit - len(body))
            body += part
            if cut:
                return bytes(body), True
            if await self._line(conn) != b"":
                raise _Protocol("chunk not followed by CRLF")

    async def aclose(self) -> None:
        """Close every kept connection (requests still running close theirs when they end)."""
        origins, self._origins = list(self._origins.values()), OrderedDict()
        for origin in origins:
            origin.evicted = True
            origin.close_idle()
        await asyncio.sleep(0)  # let the transports close


def _tokens(value: str) -> list[str]:
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def _parse_head(head: bytes) -> tuple[int, bytes, dict[str, str]]:
    lines = head.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code = rest[:3]
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit() or code < b"100" or rest[
            3:4] not in (b"", b" "):
        raise _Protocol("malformed status line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.match(name) or _BAD_VALUE.search(value):
            raise _Protocol("malformed header line")
        key = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return int(code), version, headers

