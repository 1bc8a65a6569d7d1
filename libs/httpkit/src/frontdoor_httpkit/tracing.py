"""A server span per HTTP request (route template, method, status; never headers).

The span is named ``METHOD {route template}`` (``POST /invite/{token:str}``), never with
the raw path: some paths carry bearer values (an invitation token), and spans go to an
exporter. A request no route matched is named by its method alone (OpenTelemetry's rule
for a span without a low-cardinality route).
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

__all__ = ["TracingMiddleware"]

_tracer = trace.get_tracer("frontdoor.http")


class TracingMiddleware:
    """Wraps each request in a span named ``METHOD route-template``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", "GET"))
        with _tracer.start_as_current_span(method, kind=SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", method)

            def name_by_route() -> None:
                template = scope.get("path_template")  # set by the router once the route is known
                if template:
                    span.update_name(f"{method} {template}")
                    span.set_attribute("http.route", str(template))

            async def wrapped(message: Message) -> None:
                if message["type"] == "http.response.start":
                    name_by_route()
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            try:
                await self.app(scope, receive, wrapped)
            finally:
                name_by_route()
