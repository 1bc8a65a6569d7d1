"""Real host names and real TLS in front of a stack on loopback, for tests that play the internet.

A `TlsFront` gives each name its own loopback address (``127.R.R.n``, port 443) and one
throwaway CA (trustme) whose certificate names them all, then serves, in a thread with its
own event loop:

- ``proxied`` names (Frontdoor's public hosts): TLS ends here and the bytes go on, as they
  are, over TCP to a local port (the load balancer's). Each connection to the load balancer
  leaves from the address the client connected from, so a client that dials from its own
  loopback address (`client` ``source=``) is that address to the stack behind (HAProxy's
  ``X-Forwarded-For``), as a user on their own network would be;
- ``served`` names (agents' sites, the company): ASGI apps under uvicorn over TLS, added at
  any time (`serve`), each with its lifespan.

Clients in the test (`client`) dial each name's address and verify TLS against the CA with
the name's SNI. Processes of the stack reach the same names through `stack_env`: the
``tests/support/stack_site`` ``sitecustomize`` on their ``PYTHONPATH`` resolves the names to
their addresses and trusts the CA beside certifi's roots (see that module); everything else
(the outbound allowlist: `cidr`) is the stack's own configuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import ssl
import threading
from collections.abc import Awaitable, Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Literal

import certifi
import httpcore
import httpx
import trustme

SITE_DIR = Path(__file__).resolve().parent / "stack_site"


class _Dial(httpcore.AsyncNetworkBackend):
    """Connects each known name to its loopback address (port kept); TLS still names the host."""

    def __init__(self, hosts: Mapping[str, str], source: str | None) -> None:
        self.hosts, self.source = hosts, source
        self.backend = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        address = self.hosts.get(host.lower())
        if address is None:
            raise httpcore.ConnectError(f"{host} is not in the test's world")
        return await self.backend.connect_tcp(address, port, timeout=timeout,
                                              local_address=self.source or local_address,
                                              socket_options=socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


class _Sockets(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncHTTPTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError, ssl.SSLError):
        pass


class TlsFront:
    def __init__(self, directory: Path, *, proxied: Mapping[str, int], served: Iterable[str]) -> None:
        """``proxied``: name -> local port its plaintext goes on to; ``served``: names `serve` will serve."""
        directory.mkdir(parents=True, exist_ok=True)
        self._proxied = dict(proxied)
        names = [*self._proxied, *served]
        self.prefix = f"127.{secrets.randbelow(200) + 30}.{secrets.randbelow(250) + 1}"
        self.hosts = {name: f"{self.prefix}.{n}" for n, name in enumerate(names, start=1)}
        self._ca = trustme.CA()
        leaf = self._ca.issue_cert(*names)
        self.ca_file = directory / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_file))
        self._cert, self._key = directory / "cert.pem", directory / "key.pem"
        leaf.cert_chain_pems[0].write_to_path(str(self._cert))
        leaf.private_key_pem.write_to_path(str(self._key))
        self.bundle = directory / "bundle.pem"  # certifi's roots and the CA, for the stack's processes
        self.bundle.write_bytes(Path(certifi.where()).read_bytes() + b"\n" + self._ca.cert_pem.bytes())
        self._server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        leaf.configure_cert(self._server_ctx)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tls-front", daemon=True)
        self._servers: list[Any] = []
        self._uvicorns: list[tuple[Any, asyncio.Task[None]]] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def cidr(self) -> str:
        return f"{self.prefix}.0/24"

    def stack_env(self) -> dict[str, str]:
        """Environment for the stack's processes: the names and the CA (`stack_site.sitecustomize`)."""
        return {"PYTHONPATH": str(SITE_DIR), "STACK_SITE_CA_BUNDLE": str(self.bundle),
                "STACK_SITE_HOSTS": ",".join(f"{n}={ip}" for n, ip in self.hosts.items())}

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self._ca.configure_trust(ctx)
        return ctx

    def client(self, *, source: str | None = None, timeout: float = 30.0) -> httpx.AsyncClient:
        """A client reaching every name over TCP and TLS (from ``source``, a loopback address, if given)."""
        return httpx.AsyncClient(transport=self.transport(source=source), timeout=timeout)

    def transport(self, *, source: str | None = None) -> httpx.AsyncBaseTransport:
        """The sockets behind `client`. Not an ``httpx.AsyncHTTPTransport`` itself, so an agent that
        pins a fetch to the addresses its SSRF check approved (the PAP agent pins discovery to the
        public address the test's resolver answers) leaves the dialling to `_Dial`."""
        transport = httpx.AsyncHTTPTransport(verify=self.ssl_context())
        transport._pool._network_backend = _Dial(self.hosts, source)
        return _Sockets(transport)

    # ----------------------------------------------------------------- in the front's thread

    def _run(self, coro: Awaitable[Any], timeout: float = 60.0) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        return future.result(timeout)

    def start(self) -> None:
        """Start the thread and the proxied names' listeners (port 443 on loopback: root, or
        ``CAP_NET_BIND_SERVICE``, or ``net.ipv4.ip_unprivileged_port_start`` at most 443)."""
        self._thread.start()
        for name, upstream in self._proxied.items():
            try:
                self._servers.append(self._run(self._proxy(self.hosts[name], upstream)))
            except PermissionError as exc:
                raise RuntimeError(f"cannot listen on {self.hosts[name]}:443 for {name}: https:// URLs without a "
                                   "port need port 443 (run as root, grant CAP_NET_BIND_SERVICE, or lower "
                                   "net.ipv4.ip_unprivileged_port_start)") from exc

    async def _proxy(self, address: str, upstream: int) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._tasks.add(task)
            peer = writer.get_extra_info("peername")[0]
            up_writer: asyncio.StreamWriter | None = None
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    "127.0.0.1", upstream, local_addr=(peer, 0) if peer != "127.0.0.1" else None)
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            except (OSError, asyncio.CancelledError):  # the upstream refused, or the front is stopping
                pass
            finally:
                for w in (up_writer, writer):
                    if w is not None:
                        w.close()
                self._tasks.discard(task)

        return await asyncio.start_server(handle, address, 443, ssl=self._server_ctx, reuse_address=True)

    def serve(self, name: str, app: Any, *, lifespan: Literal["on", "off"] = "off") -> None:
        """Serve ``app`` at ``https://{name}`` (uvicorn over TLS; ``lifespan="on"`` runs the app's)."""
        self._run(self._serve(self.hosts[name], app, lifespan))

    async def _serve(self, address: str, app: Any, lifespan: Literal["on", "off"]) -> None:
        import uvicorn

        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listener.bind((address, 443))
        server = uvicorn.Server(uvicorn.Config(app, ssl_certfile=str(self._cert), ssl_keyfile=str(self._key),
                                               log_level="warning", lifespan=lifespan))
        task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        self._uvicorns.append((server, task))

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def close() -> None:
            for server in self._servers:
                server.close()
            for task in list(self._tasks):
                task.cancel()
            for uv, task in self._uvicorns:
                uv.should_exit = True
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 10)

        with contextlib.suppress(Exception):
            self._run(close(), timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
