"""A lean HTTP/1.1 client for the sdk's per-request calls to Frontdoor (private).

The verifier asks Frontdoor about a Session on every request (PAP-4.9-01), so the client's
own cost is on every request's path: through ``httpx`` one small ``POST`` costs ~2.3 ms of
CPU (request and response models, httpcore, h11, anyio, cookies); the same bytes over an
asyncio stream ~0.2 ms. This client does only what those calls need: ``POST`` with a
known body over an asyncio transport, HTTP/1.1 keep-alive with a small pool per origin
(concurrent requests each get a connection of their own), ``Content-Length`` and
``chunked`` answers read up to a cap, one total deadline per request.

It fails closed: anything but a complete, well-framed answer is :class:`LeanHTTPError`
and the connection is dropped, never returned to the pool half-read nor with any byte
behind its answer (a connection's bytes are in one buffer, so none wait unseen). A
pooled connection the server closed while idle is retried once on a new connection, and
only when not a byte of an answer had arrived (RFC 9112 §9.3.1 allows retrying then);
never after.

TLS uses :func:`httpx.create_ssl_context`, so its roots are exactly the ``httpx`` default
client's (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), with hostname checks. Plain
``http`` only to loopback (the verifier's rule for the issuer). When an environment proxy
applies to the issuer, :func:`lean_supports` says no and the verifier keeps ``httpx``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import time
import urllib.request
from collections import deque
from collections.abc import Mapping
from importlib import metadata
from typing import Final, cast
from urllib.parse import urlsplit

import httpx

__all__ = ["LeanClient", "LeanHTTPError", "LeanResponse", "lean_supports"]

_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_READ: Final = 64 * 1024
_MAX_HEAD: Final = 16 * 1024
_MAX_CHUNK_LINE: Final = 1024
# ASCII digits only: str.isdigit() and int() also take other scripts' digits ("2²0"), and
# int() raises on some of those; a status, a length or a size is these bytes or malformed.
_STATUS: Final = re.compile(r"[1-9][0-9]{2}")
_LENGTH: Final = re.compile(r"[0-9]{1,18}")
_CHUNK_SIZE: Final = re.compile(rb"[0-9A-Fa-f]{1,16}")
_NO_BODY: Final = frozenset({204, 304})
_UNSAFE: Final = re.compile(r"[\r\n\x00]")


def _user_agent() -> str:
    try:
        return f"frontdoor-sdk/{metadata.version('frontdoor-sdk')}"
    except metadata.PackageNotFoundError:
        return "frontdoor-sdk"


_USER_AGENT: Final = _user_agent()


class LeanHTTPError(Exception):
    """No usable answer: connect, TLS, write, read, framing, size of the head, or the deadline.

    The message is one of this module's fixed phrases, never text from the server.
    """


class _Stale(LeanHTTPError):
    """The connection ended before a single byte of an answer arrived (a 1xx counts)."""


class LeanResponse:
    """One answer: what :func:`frontdoor_sdk._frontdoor_call.decode_answer` reads.

    Attributes:
        status_code: The status.
        headers: Header names lowercased; repeated fields joined with ``", "``.
        content: The body, decoded from ``chunked``; cut at ``max_bytes + 1`` bytes when
            longer (the connection is then dropped), so a size check sees it is too long.
    """

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    def __repr__(self) -> str:
        return f"LeanResponse({self.status_code}, {len(self.content)} bytes)"


def _proxied(scheme: str, host: str) -> bool:
    """Whether ``httpx``'s default client may send to ``host`` through a configured proxy.

    The same source as ``httpx`` (:func:`urllib.request.getproxies`); ``NO_PROXY`` counts
    only where it plainly names the host (``*``, the host, or a domain it is in), so in
    doubt the answer is "proxied" and the verifier keeps ``httpx``.
    """
    proxies = urllib.request.getproxies()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    host = host.lower()
    for entry in (part.strip().lower() for part in proxies.get("no", "").split(",")):
        if entry == "*" or entry.strip("[]") == host:
            return False
        if entry and "://" not in entry and host.endswith(entry if entry.startswith(".") else f".{entry}"):
            return False
    return True


def lean_supports(url: str) -> bool:
    """Whether the lean client may carry calls to ``url`` with the same result as ``httpx``.

    ``https`` anywhere, ``http`` to loopback only; no user info in the URL; no environment
    proxy for it (``HTTPS_PROXY`` and friends, which the ``httpx`` default client honours).
    """
    parts = urlsplit(url)
    host = parts.hostname
    if not host or parts.username is not None or parts.password is not None:
        return False
    try:
        parts.port  # noqa: B018 - raises on a malformed port, which httpx refuses too
    except ValueError:
        return False
    if parts.scheme != "https" and not (parts.scheme == "http" and host in _LOOPBACK):
        return False
    return not _proxied(parts.scheme, host)


class _Target:
    __slots__ = ("head", "host", "key", "port", "tls")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        host = parts.hostname
        tls = parts.scheme == "https"
        if not host or not (tls or (parts.scheme == "http" and host in _LOOPBACK)):
            raise ValueError("the lean client speaks https, or http to loopback only")
        if parts.username is not None or parts.password is not None:
            raise ValueError("no user info in the URL")
        port = parts.port or (443 if tls else 80)
        named = f"[{host}]" if ":" in host else host
        authority = named if port == (443 if tls else 80) else f"{named}:{port}"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if _UNSAFE.search(path) or " " in path:
            raise ValueError("the URL's path is not a valid request target")
        self.host = host
        self.port = port
        self.tls = tls
        self.key = (parts.scheme, host, port)
        self.head = f"POST {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: {_USER_AGENT}\r\n"


class _Wire(asyncio.Protocol):
    """One connection's bytes, in one buffer: all that arrived and was not yet read as an answer.

    There is no second buffer (a ``StreamReader``'s) where bytes behind an answer could wait
    unseen: what the buffer holds after an answer, or gets while the connection is idle, is
    what decides that the connection is not reused.
    """

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.received = 0
        """Bytes that ever arrived: an exchange tells by it whether any of its answer did."""
        self.eof = False
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._lost: Exception | None = None
        self._closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)  # a stream's (TCP or TLS)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.received += len(data)
        if len(self.buffer) > _READ and not self._paused and self._transport is not None:
            self._paused = True  # more than an answer's next step needs: the reader resumes it
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = self._closed = True
        self._lost = exc
        self._wake()
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def drain(self) -> None:
        """Wait until the transport takes more writes.

        Raises:
            OSError: The connection was lost.
        """
        if self._writable is not None:
            await self._writable
        if self._closed:
            raise self._lost if isinstance(self._lost, OSError) else ConnectionResetError("lost")

    def resume(self) -> None:
        """Read from the socket again (after an answer that filled the buffer)."""
        if self._paused and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    async def more(self) -> bool:
        """Wait for bytes beyond those in the buffer; ``False`` at the end of the connection.

        Raises:
            OSError: The connection was lost with an error (a reset, TLS).
        """
        size = len(self.buffer)
        self.resume()
        while len(self.buffer) == size:
            if self.eof:
                if isinstance(self._lost, OSError):
                    raise self._lost
                return False
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return True


class _Connection:
    """One kept-alive connection; ``exchange`` sends one request and reads its whole answer."""

    __slots__ = ("idle_since", "transport", "wire")

    def __init__(self, transport: asyncio.Transport, wire: _Wire) -> None:
        self.transport = transport
        self.wire = wire
        self.idle_since = 0.0

    def idle(self, now: float) -> None:
        self.idle_since = now
        self.wire.resume()  # so a server's close (or bytes) while idle is seen

    def usable(self, now: float, expiry: float) -> bool:
        # Bytes while idle (a server's 408 before it closes, or anything else) are no answer
        # to the next request: such a connection is dropped, like one the server closed.
        return (now - self.idle_since < expiry and not self.wire.buffer and not self.wire.eof
                and not self.transport.is_closing())

    def close(self, *, abort: bool = False) -> None:
        with contextlib.suppress(RuntimeError):  # its event loop is closed: nothing left to close
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    async def exchange(self, request: bytes, max_bytes: int) -> tuple[LeanResponse, bool]:
        """Send ``request``; the answer, and whether the connection may be reused.

        It may be reused only when the answer was read whole and nothing at all is buffered
        behind it: bytes there are no answer to a later request.

        Raises:
            _Stale: The connection ended before any byte of an answer (interim or final).
            LeanHTTPError: Any other failure (the caller drops the connection).
            OSError: From the socket or TLS (likewise).
        """
        wire = self.wire
        buffer = wire.buffer
        before = wire.received  # once a byte arrived (an interim 1xx too), never _Stale
        self.transport.write(request)
        try:
            await wire.drain()
        except OSError:
            if wire.received == before:
                raise _Stale("the connection was closed") from None
            raise
        scanned = 0
        heads = 0  # the heads' bytes, interim ones included: together at most _MAX_HEAD
        while True:  # the head; interim 1xx answers are skipped
            end = buffer.find(b"\r\n\r\n", scanned)
            if end < 0:
                if heads + len(buffer) > _MAX_HEAD:
                    raise LeanHTTPError("the answer's head is too large")
                scanned = max(len(buffer) - 3, 0)
                try:
                    arrived = await wire.more()
                except OSError:
                    if wire.received == before:
                        raise _Stale("the connection was reset") from None
                    raise
                if not arrived:
                    if wire.received == before:
                        raise _Stale("the connection was closed")
                    raise LeanHTTPError("the connection closed mid-answer")
                continue
            heads += end + 4
            if heads > _MAX_HEAD:  # however many reads brought it
                raise LeanHTTPError("the answer's head is too large")
            version, status, headers = _parse_head(bytes(buffer[:end]))
            del buffer[: end + 4]
            scanned = 0
            if 100 <= status < 200:
                if status == 101:
                    raise LeanHTTPError("the server switched protocols")
                continue
            break
        keep = _keeps_alive(version, headers)
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding != "identity":
            raise LeanHTTPError("the answer is content-encoded")  # none was accepted
        limit = max_bytes + 1
        if status in _NO_BODY:
            content = b""
        elif "transfer-encoding" in headers:
            if "content-length" in headers or headers["transfer-encoding"].lower() != "chunked":
                raise LeanHTTPError("the answer's framing is ambiguous")
            content, whole = await self._chunked(limit)
            keep = keep and whole
        elif "content-length" in headers:
            length = _content_length(headers["content-length"])
            want = min(length, limit)
            while len(buffer) < want:
                await self._more()
            content = bytes(buffer[:want])
            del buffer[:want]
            keep = keep and length == want
        else:  # delimited by the end of the connection
            while len(buffer) < limit and await wire.more():
                pass
            content = bytes(buffer[:limit])
            keep = False
        return LeanResponse(status, headers, content), keep and not buffer

    async def _more(self) -> None:
        if not await self.wire.more():
            raise LeanHTTPError("the connection closed mid-answer")

    async def _chunked(self, limit: int) -> tuple[bytes, bool]:
        """The ``chunked`` body (RFC 9112 §7.1), at most ``limit`` bytes; whether it was read whole.

        Read whole, its bytes (the trailer's too) are gone from the buffer.
        """
        buffer = self.wire.buffer
        body = bytearray()
        pos = 0
        while True:
            line_end = buffer.find(b"\r\n", pos)
            while line_end < 0:
                if len(buffer) - pos > _MAX_CHUNK_LINE:
                    raise LeanHTTPError("a chunk line is too long")
                await self._more()
                line_end = buffer.find(b"\r\n", pos)
            size_field = bytes(buffer[pos:line_end]).split(b";", 1)[0].strip(b" \t")
            if not _CHUNK_SIZE.fullmatch(size_field):
                raise LeanHTTPError("a chunk size is malformed")
            size = int(size_field, 16)
            pos = line_end + 2
            if size == 0:
                break
            room = limit - len(body)
            if size > room:  # too long: read up to the cap, then drop the connection
                while len(buffer) - pos < room:
                    await self._more()
                body += buffer[pos : pos + room]
                return bytes(body), False
            while len(buffer) - pos < size + 2:
                await self._more()
            if buffer[pos + size : pos + size + 2] != b"\r\n":
                raise LeanHTTPError("a chunk is not followed by CRLF")
            body += buffer[pos : pos + size]
            del buffer[: pos + size + 2]
            pos = 0
        trailer = pos
        while True:  # trailer fields, ignored, up to the empty line; together at most _MAX_HEAD
            line_end = buffer.find(b"\r\n", pos)
            while line_end < 0:
                if len(buffer) - trailer > _MAX_HEAD:
                    raise LeanHTTPError("the trailer is too large")
                await self._more()
                line_end = buffer.find(b"\r\n", pos)
            if line_end + 2 - trailer > _MAX_HEAD:
                raise LeanHTTPError("the trailer is too large")
            if line_end == pos:
                del buffer[: pos + 2]
                return bytes(body), True
            pos = line_end + 2


def _parse_head(head: bytes) -> tuple[str, int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if (version not in ("HTTP/1.1", "HTTP/1.0") or not _STATUS.fullmatch(code)
            or (len(rest) > 3 and rest[3] != " ")):
        raise LeanHTTPError("the status line is malformed")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip(" \t") or " " in name or line[0] in " \t":
            raise LeanHTTPError("a header field is malformed")
        key = name.lower()
        value = value.strip(" \t")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return version, int(code), headers


def _content_length(value: str) -> int:
    lengths = {part.strip(" \t") for part in value.split(",")}
    if len(lengths) != 1:
        raise LeanHTTPError("the answer's Content-Length is ambiguous")
    length = lengths.pop()
    if not _LENGTH.fullmatch(length):
        raise LeanHTTPError("the answer's Content-Length is malformed")
    return int(length)


def _keeps_alive(version: str, headers: Mapping[str, str]) -> bool:
    tokens = {token.strip(" \t").lower() for token in headers.get("connection", "").split(",")}
    if version == "HTTP/1.1":
        return "close" not in tokens
    return "keep-alive" in tokens


class LeanClient:
    """``POST`` to Frontdoor over kept-alive HTTP/1.1 connections.

    Args:
        max_connections: The most connections open at once (busy and idle); a request
            beyond waits for one, within its deadline.
        max_idle: The most idle connections kept per origin.
        keepalive_expiry: Seconds an idle connection is kept.
    """

    def __init__(self, *, max_connections: int = 100, max_idle: int = 32, keepalive_expiry: float = 5.0) -> None:
        self._slots = asyncio.Semaphore(max_connections)
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._idle: dict[tuple[str, str, int], deque[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._targets: dict[str, _Target] = {}
        self._ssl: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._max_connections = max_connections
        self._closed = False
        self.connects = 0
        """How many connections were opened (for tests and benchmarks)."""

    def __repr__(self) -> str:
        return f"LeanClient(idle={sum(len(d) for d in self._idle.values())}, busy={len(self._busy)})"

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    async def post(
        self,
        url: str,
        *,
        authorization: str,
        content_type: str,
        body: bytes,
        seconds: float,
        max_bytes: int,
    ) -> LeanResponse:
        """``POST body`` to ``url`` and read the whole answer within ``seconds``.

        Raises:
            LeanHTTPError: No complete answer (connect, TLS, I/O, framing, deadline).
            ValueError: ``url`` is not one this client speaks to.
        """
        if self._closed:
            raise LeanHTTPError("the client is closed")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._rebind(loop)
        target = self._target(url)
        if _UNSAFE.search(authorization) or _UNSAFE.search(content_type):
            raise LeanHTTPError("a header value is not valid")
        try:
            request = (
                f"{target.head}Authorization: {authorization}\r\nAccept: application/json\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode("latin-1") + body
        except UnicodeEncodeError:
            raise LeanHTTPError("a header value is not valid") from None
        try:
            async with asyncio.timeout(seconds), self._slots:
                return await self._exchange(target, request, max_bytes)
        except TimeoutError:
            raise LeanHTTPError("no answer in time") from None
        except OSError:
            raise LeanHTTPError("the connection failed") from None

    async def aclose(self) -> None:
        """Close every connection; later calls fail (closed)."""
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()
        for conn in list(self._busy):
            conn.close(abort=True)
        self._busy.clear()

    def _rebind(self, loop: asyncio.AbstractEventLoop) -> None:
        """A first call, or a call from another event loop: connections belong to their loop."""
        for idle in self._idle.values():
            while idle:
                idle.pop().close(abort=True)
        self._slots = asyncio.Semaphore(self._max_connections)
        self._loop = loop

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            target = _Target(url)
            if len(self._targets) < 64:
                self._targets[url] = target
        return target

    async def _exchange(self, target: _Target, request: bytes, max_bytes: int) -> LeanResponse:
        conn = self._take_idle(target.key)
        while True:
            if self._closed:
                raise LeanHTTPError("the client is closed")
            fresh = conn is None
            if conn is None:
                conn = await self._connect(target)
            self._busy.add(conn)
            try:
                response, keep = await conn.exchange(request, max_bytes)
            except _Stale:
                conn.close(abort=True)
                self._busy.discard(conn)
                if fresh:
                    raise
                conn = None  # a kept-alive connection the server had closed: once, on a new one
                continue
            except BaseException:  # errors, the deadline, cancellation: never pooled half-read
                conn.close(abort=True)
                self._busy.discard(conn)
                raise
            self._busy.discard(conn)
            if keep and not self._closed:
                self._put_idle(target.key, conn)
            else:
                conn.close()
            return response

    async def _connect(self, target: _Target) -> _Connection:
        context = self._ssl_context() if target.tls else None
        transport, wire = await asyncio.get_running_loop().create_connection(
            _Wire, target.host, target.port, ssl=context, server_hostname=target.host if context else None,
        )
        self.connects += 1
        return _Connection(transport, wire)

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = httpx.create_ssl_context()  # verification on, hostname checked
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    def _take_idle(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used
            if conn.usable(now, self._expiry):
                return conn
            conn.close()
        return None

    def _put_idle(self, key: tuple[str, str, int], conn: _Connection) -> None:
        now = time.monotonic()
        conn.idle(now)
        idle = self._idle.setdefault(key, deque())
        while idle and (len(idle) >= self._max_idle or now - idle[0].idle_since >= self._expiry):
            idle.popleft().close()
        idle.append(conn)
