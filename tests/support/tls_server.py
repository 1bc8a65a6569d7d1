"""A local HTTPS (or plain HTTP) server with scripted routes, for outbound-fetch tests.

It runs its own asyncio loop in a background thread, so it works whatever event loop
the test uses, and writes responses by hand so tests can send what a hostile server
would: duplicate headers, trickled bodies, endless chunked bodies, bad redirects.
Certificates come from a trustme CA; `RouteServer.client_context` trusts it.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from dataclasses import dataclass, field
from types import TracebackType

import trustme

__all__ = ["Route", "RouteServer", "SeenRequest", "json_route", "redirect_route"]


@dataclass(frozen=True)
class Route:
    """A scripted response.

    Attributes:
        status: HTTP status code.
        headers: Header fields in order; repeats are sent as separate fields.
        body: The body bytes (repeated ``repeat`` times).
        repeat: How many times ``body`` is sent (for huge bodies without a huge
            allocation).
        chunked: Send with ``Transfer-Encoding: chunked`` and no Content-Length.
        trickle_delay: When set, send the body one byte at a time with this pause.
        content_length: Whether to send a Content-Length (ignored when chunked).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    body: bytes = b"{}"
    repeat: int = 1
    chunked: bool = False
    trickle_delay: float | None = None
    content_length: bool = True


def json_route(body: bytes = b'{"ok": true}', *, extra: tuple[tuple[str, str], ...] = ()) -> Route:
    """A 200 JSON response."""
    return Route(headers=(("Content-Type", "application/json"), *extra), body=body)


def redirect_route(location: str, status: int = 302) -> Route:
    """A redirect to ``location``."""
    return Route(status=status, headers=(("Location", location),), body=b"")


@dataclass(frozen=True)
class SeenRequest:
    """A request the server received: its target and header fields (names lower-cased)."""

    path: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> list[str]:
        """All values of header ``name``."""
        return [v for k, v in self.headers if k == name.lower()]


@dataclass
class _State:
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    sni_names: list[str | None] = field(default_factory=list)


class RouteServer:
    """Serves `Route` objects by path on ``127.0.0.1`` with a certificate for ``hostnames``.

    Use as a context manager; the port is chosen by the OS. Unknown paths get a 404.
    """

    def __init__(
        self,
        hostnames: tuple[str, ...] = ("agent.test",),
        *,
        tls: bool = True,
        ca: trustme.CA | None = None,
    ) -> None:
        """Prepare the server (nothing listens until ``__enter__``).

        Args:
            hostnames: Names on the server certificate.
            tls: Serve HTTPS; plain HTTP when False.
            ca: The issuing CA; a fresh one when None.
        """
        self.ca = ca if ca is not None else trustme.CA()
        self.hostnames = hostnames
        self.tls = tls
        self.port = 0
        self._state = _State()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    # -- configuration and inspection -------------------------------------------------

    def route(self, path: str, route: Route) -> None:
        """Serve ``route`` at ``path`` (the request target, query included)."""
        with self._lock:
            self._state.routes[path] = route

    def url(self, path: str, host: str | None = None) -> str:
        """An absolute URL for ``path`` on this server, by default on its first hostname."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host or self.hostnames[0]}:{self.port}{path}"

    @property
    def requests(self) -> list[SeenRequest]:
        """Requests received so far, in order."""
        with self._lock:
            return list(self._state.requests)

    @property
    def sni_names(self) -> list[str | None]:
        """The SNI server name of each TLS handshake, in order."""
        with self._lock:
            return list(self._state.sni_names)

    def client_context(self) -> ssl.SSLContext:
        """A verifying client context that trusts this server's CA."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context

    # -- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> RouteServer:
        self._thread = threading.Thread(target=self._run, name="route-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("route server did not start")
        if self._error is not None:
            raise RuntimeError("route server failed to start") from self._error
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*self.hostnames).configure_cert(context)

        def record_sni(_sock: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
            with self._lock:
                self._state.sni_names.append(name)

        context.sni_callback = record_sni
        return context

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced to __enter__ when start-up fails
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._handle, "127.0.0.1", 0, ssl=self._server_context() if self.tls else None
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
        # asyncio.run then cancels the handlers still running (trickles, endless bodies).

    # -- one connection ---------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            _method, target, _version = lines[0].split(" ", 2)
            headers = tuple(
                (name.strip().lower(), value.strip())
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            )
            with self._lock:
                self._state.requests.append(SeenRequest(target, headers))
                route = self._state.routes.get(target, Route(status=404, body=b"{}"))
            await self._respond(reader, writer, route)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ssl.SSLError, ValueError):
            pass  # clients hanging up mid-response is what several tests are about
        except asyncio.CancelledError:
            # Server shutdown. Ending normally keeps Python 3.11's stream callback
            # from logging the cancellation as an unhandled error.
            pass
        finally:
            writer.close()

    async def _respond(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: Route) -> None:
        lines = [f"HTTP/1.1 {route.status} Scripted"]
        lines += [f"{name}: {value}" for name, value in route.headers]
        size = len(route.body) * route.repeat
        if route.chunked:
            lines.append("Transfer-Encoding: chunked")
        elif route.content_length:
            lines.append(f"Content-Length: {size}")
        lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        if route.trickle_delay is not None:
            for i in range(size):
                await asyncio.sleep(route.trickle_delay)
                if writer.is_closing() or reader.at_eof():
                    return
                writer.write(route.body[i % len(route.body) : i % len(route.body) + 1])
                await writer.drain()
            return
        for _ in range(route.repeat):
            # drain() does not yield while the transport is not paused, and a TLS
            # transport whose socket died drops writes without pausing: yield so the
            # connection-lost callback can run, then stop once the client has gone.
            await asyncio.sleep(0)
            if writer.is_closing() or reader.at_eof():
                return
            if route.chunked:
                writer.write(f"{len(route.body):x}\r\n".encode() + route.body + b"\r\n")
            else:
                writer.write(route.body)
            await writer.drain()
        if route.chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
