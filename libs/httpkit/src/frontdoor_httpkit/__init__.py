"""Litestar plumbing shared by Frontdoor's HTTP services (no domain words here)."""

from .client_address import client_address, client_address_from, network_key
from .health import health_routes
from .json_body import BadBody, read_json
from .json_guard import has_nul, make_json_guard, url_has_nul
from .metrics import Observer, lean_route_observer, metrics_lifespan, request_metrics_middleware
from .openapi_document import (
    DocumentPlugin,
    Problem,
    ProtocolError,
    described,
    error_responses,
    openapi_document,
    problem_responses,
)
from .problem import problem, problem_exception_handlers
from .request_id import RequestIdMiddleware, current_request_id
from .security_headers import SecurityHeadersMiddleware, content_security_policy, origin_source
from .shutdown_notice import ShutdownNotice, shutdown_notice
from .tracing import opentelemetry_plugin, route_span_details

__all__ = [
    "BadBody",
    "DocumentPlugin",
    "Observer",
    "Problem",
    "ProtocolError",
    "RequestIdMiddleware",
    "SecurityHeadersMiddleware",
    "ShutdownNotice",
    "client_address",
    "client_address_from",
    "content_security_policy",
    "current_request_id",
    "described",
    "error_responses",
    "has_nul",
    "health_routes",
    "make_json_guard",
    "lean_route_observer",
    "metrics_lifespan",
    "network_key",
    "openapi_document",
    "opentelemetry_plugin",
    "origin_source",
    "problem",
    "problem_exception_handlers",
    "problem_responses",
    "read_json",
    "request_metrics_middleware",
    "route_span_details",
    "shutdown_notice",
    "url_has_nul",
]
