"""A pretend internet for the SSRF-safe fetcher: tests register what each URL answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx


class MockWeb(httpx.AsyncBaseTransport):
    """Routes by (host, path); anything unregistered is 404."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], httpx.Response] = {}
        self.handlers: dict[tuple[str, str], Callable[[httpx.Request], Awaitable[httpx.Response]]] = {}
        self.requests: list[httpx.Request] = []

    def handle(self, url: str, handler: Callable[[httpx.Request], Awaitable[httpx.Response]]) -> None:
        """Answer ``url`` with ``await handler(request)`` (a receiver with behaviour)."""
        u = httpx.URL(url)
        self.handlers[(u.host, u.path)] = handler

    def serve(self, url: str, *, status: int = 200, json: Any = None, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> None:
        u = httpx.URL(url)
        hdrs = {"content-type": "application/json", **(headers or {})}
        content = body if body is not None else httpx.Response(200, json=json).content
        self.routes[(u.host, u.path)] = httpx.Response(status, headers=hdrs, content=content)

    def redirect(self, url: str, to: str, status: int = 302) -> None:
        u = httpx.URL(url)
        self.routes[(u.host, u.path)] = httpx.Response(status, headers={"location": to})

    def forget(self, host: str) -> None:
        for key in [k for k in self.routes if k[0] == host]:
            del self.routes[key]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handler = self.handlers.get((request.url.host, request.url.path))
        if handler is not None:
            await request.aread()
            return await handler(request)
        canned = self.routes.get((request.url.host, request.url.path))
        if canned is None:
            return httpx.Response(404, headers={"content-type": "text/plain"}, content=b"not found")
        return httpx.Response(canned.status_code, headers=canned.headers, content=canned.content)
