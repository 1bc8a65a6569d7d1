"""A server span per HTTP request (route template, method, status; never headers)."""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

__all__ = ["TracingMiddleware"]

_tracer = trace.get_tracer("frontdoor.http")


class TracingMiddleware:
    """Wraps each request in a span named ``METHOD path``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", "GET"))
        with _tracer.start_as_current_span(f"{method} {scope['path']}", kind=SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", method)
            span.set_attribute("url.path", scope["path"])

            async def wrapped(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            await self.app(scope, receive, wrapped)
