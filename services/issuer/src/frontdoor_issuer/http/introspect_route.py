"""The lean route for ``POST /{slug}/oauth/introspect``, in front of Litestar (issue #13 §1).

Introspection is on the path of every protected company request that is not answered
from a Shared Signals stream, so it skips what it does not need: Litestar's routing,
request and response objects, the request metrics middleware and the OpenTelemetry
server span. It keeps the request ID (``X-Request-Id``, bound for logs), the security
headers, the body size limit and the answers of :func:`.introspect.answer`, which the
Litestar handler shares. Every other request, and the lifespan, go to Litestar.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from frontdoor_httpkit import RequestIdMiddleware, SecurityHeadersMiddleware

from .introspect import answer

__all__ = ["IntrospectionRoute"]

_PATH = re.compile(r"^/([^/]+)/oauth/introspect$")
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_TOO_LARGE = b'{"error":"invalid_request","error_description":"The request is not valid."}'


class IntrospectionRoute:
    """ASGI: ``POST /{slug}/oauth/introspect`` answered here, anything else by ``app``."""

    def __init__(self, app: Any, *, max_body_bytes: int, hsts: bool) -> None:
        self.app: Any = app  # the Litestar app; its state.ctx exists once its lifespan ran
        self._max = max_body_bytes
        self._lean: Any = RequestIdMiddleware(SecurityHeadersMiddleware(self._serve, hsts=hsts))  # type: ignore[arg-type]

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and _PATH.match(scope["path"]):
            await self._lean(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _PATH.match(scope["path"])
        assert match is not None
        authorization = content_type = ""
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.decode("latin-1")
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                await _send(send, 413, _TOO_LARGE, {"Cache-Control": "no-store"})
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        result = await answer(self.app.state.ctx, match.group(1), authorization, content_type, b"".join(chunks))
        await _send(send, result.status, result.body, result.headers)


async def _send(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
