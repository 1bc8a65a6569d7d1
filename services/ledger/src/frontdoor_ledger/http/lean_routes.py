"""The agent's confirm on a lean route in front of Litestar (issue #13 §4):
``POST /{slug}/operations/{operation_id}/confirm``.

Every confirm an agent sends pays Litestar's routing, request object, dependency injection
and middleware chain, none of which the confirm needs; so, as the issuer's token and
introspection endpoints (``frontdoor_issuer.http.lean_routes``), it is answered here by
:func:`.agent_operations.agent_confirm`, the code the Litestar handler runs, and sent as
Litestar would send that answer (the same ``Response`` rendered by Litestar's own
``to_asgi_response``: status, body and headers byte for byte). What the app's middleware
and handlers add is kept: the request ID (``X-Request-Id``, bound for logs), the security
headers, the body size limit (``413``), the request metrics (``frontdoor_requests_total``
and the duration histogram, by route template), the server span continuing an incoming
``traceparent`` when tracing is on, a ``Refused`` answered with its response, a use case's
refusal as the app's handler renders it, and a crash as the app's plain 500, logged
through the redacting pipeline. Every other request, and the lifespan, go to Litestar.
"""

from __future__ import annotations

import re
import time
from typing import Any

import structlog
from frontdoor_core.errors import DomainError
from frontdoor_httpkit import Observer, RequestIdMiddleware, SecurityHeadersMiddleware
from litestar import Response
from litestar.types import Receive, Send
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..agent_auth import Refused
from ..inbound import Inbound
from .agent_operations import agent_confirm
from .company_api import agent_domain_error

__all__ = ["LeanRoutes", "crash_response"]

_CONFIRM = re.compile(r"^/([^/]+)/operations/([^/]+)/confirm$")
_TEMPLATE = "/{slug}/operations/{operation_id}/confirm"  # as Litestar's metrics and spans name the route

Scope = Any  # an ASGI HTTP scope, read as a dict
_NO_STORE = {"Cache-Control": "no-store"}
_log = structlog.get_logger("frontdoor.ledger")
_tracer = trace.get_tracer("frontdoor_ledger.http.lean_routes")


def crash_response() -> Response[Any]:
    """The app's answer to an unexpected error at the agents' endpoints (``app._error``)."""
    return Response({"error": "server_error", "error_description": "Something went wrong on our side."},
                    status_code=500, headers=_NO_STORE)


def too_large_response() -> Response[Any]:
    """The app's answer to a body over ``FRONTDOOR_MAX_BODY_BYTES`` at the agents' endpoints."""
    return Response({"error": "invalid_request", "error_description": "The request is not valid."},
                    status_code=413, headers=_NO_STORE)


class LeanRoutes:
    """ASGI: the agent's confirm answered here, anything else by ``app``."""

    def __init__(self, app: Any, *, max_body_bytes: int, hsts: bool, observe: Observer | None = None) -> None:
        self.app: Any = app  # the Litestar app; its state.ctx exists once its lifespan ran
        self._max = max_body_bytes
        self._observe = observe
        self._lean: Any = RequestIdMiddleware(SecurityHeadersMiddleware(self._serve, hsts=hsts))

    @property
    def state(self) -> Any:
        return self.app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and _CONFIRM.match(scope["path"]):
            await self._lean(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        if isinstance(trace.get_tracer_provider(), TracerProvider):  # tracing on: the plugin's server span
            carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
            with _tracer.start_as_current_span(f"POST {_TEMPLATE}", context=propagate.extract(carrier),
                                               kind=SpanKind.SERVER, attributes={
                                                   "http.method": "POST", "http.route": _TEMPLATE,
                                                   "http.target": _TEMPLATE, "url.path": _TEMPLATE}) as span:
                status = await self._respond(scope, receive, send)
                span.set_attribute("http.status_code", status)
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
        else:
            status = await self._respond(scope, receive, send)
        if self._observe is not None and status:
            self._observe("POST", _TEMPLATE, status, time.perf_counter() - started)

    async def _respond(self, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the request; its status (0: the client left before its body was read)."""
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message: Any = await receive()
            if message["type"] == "http.disconnect":
                return 0
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._max:
                response = too_large_response()
                await response.to_asgi_response(None, None)(scope, receive, send)  # type: ignore[arg-type]
                return 413
            chunks.append(chunk)
            more = message.get("more_body", False)
        raw = b"".join(chunks)

        async def body() -> bytes:
            return raw

        match = _CONFIRM.match(scope["path"])
        assert match is not None
        try:
            response = await agent_confirm(self.app.state.ctx, match.group(1), match.group(2),
                                           Inbound.from_scope(scope), body)
        except Refused as refused:
            response = refused.response
        except DomainError as exc:
            response = agent_domain_error(exc)
        except Exception as exc:
            # As the app's crash handler: logged through the redacting pipeline, a plain 500.
            _log.error("unhandled_exception", exc_info=exc)
            response = crash_response()
        asgi = response.to_asgi_response(None, None)  # type: ignore[arg-type]  # Litestar's own rendering
        await asgi(scope, receive, send)
        return asgi.status_code
