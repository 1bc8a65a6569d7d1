"""Request IDs: accepted from a trusted proxy header when well-formed, else generated."""

from __future__ import annotations

import re
import secrets
from contextvars import ContextVar

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestIdMiddleware", "current_request_id"]

_current: ContextVar[str | None] = ContextVar("frontdoor_request_id", default=None)
_SHAPE = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


def current_request_id() -> str | None:
    """The ID of the request being served, if any."""
    return _current.get()


class RequestIdMiddleware:
    """Binds ``request_id`` for logs and echoes it in ``X-Request-Id``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _SHAPE.match(incoming) else "req_" + secrets.token_hex(8)
        token = _current.set(rid)
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=rid)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", rid.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)
