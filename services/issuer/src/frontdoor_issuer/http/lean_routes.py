"""The lean routes in front of Litestar (issue #13 §1, §2): ``POST /{slug}/oauth/introspect``
and ``POST /{slug}/oauth/token``.

Introspection is on the path of every protected company request that is not answered from
a Shared Signals stream, and the token endpoint starts and renews every Session, so both
skip what they do not need: Litestar's routing, request and response objects and its
dependency injection, the OpenTelemetry server span. They keep the request ID
(``X-Request-Id``, bound for logs), the security headers, the body size limit, the request
metrics (the same ``frontdoor_requests_total`` and duration histogram, labelled with the route
template) and the answers of :func:`.introspect.answer` and :func:`.token.answer`, which the
Litestar handlers share. Every other request, and the lifespan, go to Litestar.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from frontdoor_httpkit import Observer, RequestIdMiddleware, SecurityHeadersMiddleware, client_address_from

from . import introspect, token
from .introspect import Answer

__all__ = ["LeanRoutes"]

_INTROSPECT = re.compile(r"^/([^/]+)/oauth/introspect$")
_TOKEN = re.compile(r"^/([^/]+)/oauth/token$")
_TOKEN_TEMPLATE = "/{slug}/oauth/token"  # the route templates, as Litestar's request metrics label them (path_template)
_INTROSPECT_TEMPLATE = "/{slug}/oauth/introspect"
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_TOO_LARGE = b'{"error":"invalid_request","error_description":"The request is not valid."}'
_SERVER_ERROR = b'{"error":"server_error","error_description":"Something went wrong on our side."}'
_log = structlog.get_logger("frontdoor.issuer")


class LeanRoutes:
    """ASGI: the two endpoints answered here, anything else by ``app``."""

    def __init__(self, app: Any, *, max_body_bytes: int, hsts: bool, trusted_proxies: str = "",
                 observe: Observer | None = None) -> None:
        self.app: Any = app  # the Litestar app; its state.ctx exists once its lifespan ran
        self._max = max_body_bytes
        self._trusted = trusted_proxies
        self._observe = observe
        self._lean: Any = RequestIdMiddleware(SecurityHeadersMiddleware(self._serve, hsts=hsts))  # type: ignore[arg-type]

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and (
                _INTROSPECT.match(scope["path"]) or _TOKEN.match(scope["path"])):
            await self._lean(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        path = scope["path"]
        authorization = content_type = ""
        dpop: list[str] = []
        forwarded: list[str] = []
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"dpop":
                dpop.append(value.decode("latin-1"))
            elif name == b"x-forwarded-for":
                forwarded.append(value.decode("latin-1"))
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
        raw = b"".join(chunks)
        is_token = _TOKEN.match(path) is not None
        try:
            result = await self._answer(scope, path, raw, authorization=authorization, content_type=content_type,
                                        dpop=dpop, forwarded=forwarded)
        except Exception as exc:
            # As the Litestar app's crash handler: logged through the redacting pipeline, a plain 500.
            _log.error("unhandled_exception", exc_info=exc)
            result = Answer(500, _SERVER_ERROR, {"Cache-Control": "no-store"})
        await _send(send, result.status, result.body, result.headers)
        if self._observe is not None:
            self._observe("POST", _TOKEN_TEMPLATE if is_token else _INTROSPECT_TEMPLATE, result.status,
                          time.perf_counter() - started)

    async def _answer(self, scope: Scope, path: str, raw: bytes, *, authorization: str, content_type: str,
                      dpop: list[str], forwarded: list[str]) -> Answer:
        ctx = self.app.state.ctx
        if (match := _TOKEN.match(path)) is not None:
            client = scope.get("client")
            peer = str(client[0]) if client else "unknown"
            return await token.answer(ctx, self.app.state.grants, match.group(1), content_type, raw,
                                      dpop=dpop, address=client_address_from(peer, forwarded, self._trusted))
        match = _INTROSPECT.match(path)
        assert match is not None
        return await introspect.answer(ctx, match.group(1), authorization, content_type, raw)


async def _send(send: Send, status: int, body: bytes, headers: dict[str, str]) -> None:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw.extend((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
