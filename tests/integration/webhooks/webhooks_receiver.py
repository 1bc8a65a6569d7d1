"""A real local HTTP webhook receiver for delivery tests.

It listens on 127.0.0.1 in the test's own event loop, records every request (path,
headers, exact body bytes) and answers from a per-path script of `Reply` objects (the
last one repeats), so a test can say "503 twice, then 200" or "hang for 2 s".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    body: bytes = b"{}"
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Use as ``async with Receiver() as r``; ``r.url(path)`` is its address."""

    port: int = 0
    received: list[Received] = field(default_factory=list)
    _scripts: dict[str, list[Reply]] = field(default_factory=dict)
    _server: asyncio.Server | None = None

    def script(self, path: str, *replies: Reply) -> None:
        """Answer requests to ``path`` with ``replies`` in turn, repeating the last."""
        self._scripts[path] = list(replies)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def __aenter__(self) -> Receiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _next(self, path: str) -> Reply:
        script = self._scripts.get(path)
        if not script:
            return Reply(status=404, body=b"not found")
        return script.pop(0) if len(script) > 1 else script[0]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            _method, target, _version = lines[0].split(" ", 2)
            headers = {name.strip().lower(): value.strip()
                       for name, _, value in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.append(Received(target, headers, body))
            reply = self._next(target)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            out = [f"HTTP/1.1 {reply.status} Scripted", *(f"{k}: {v}" for k, v in reply.headers),
                   f"Content-Length: {len(reply.body)}", "Connection: close"]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + reply.body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
