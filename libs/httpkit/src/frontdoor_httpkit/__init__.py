"""Litestar plumbing shared by Frontdoor's HTTP services (no domain words here)."""

from .client_address import client_address, network_key
from .health import health_routes
from .json_body import BadBody, read_json
from .json_guard import make_json_guard
from .metrics import metrics_lifespan, request_metrics_middleware
from .problem import problem, problem_exception_handlers
from .request_id import RequestIdMiddleware, current_request_id
from .security_headers import SecurityHeadersMiddleware, content_security_policy, origin_source
from .tracing import opentelemetry_plugin, route_span_details

__all__ = [
    "BadBody",
    "RequestIdMiddleware",
    "SecurityHeadersMiddleware",
    "client_address",
    "content_security_policy",
    "current_request_id",
    "health_routes",
    "make_json_guard",
    "metrics_lifespan",
    "network_key",
    "opentelemetry_plugin",
    "origin_source",
    "problem",
    "problem_exception_handlers",
    "read_json",
    "request_metrics_middleware",
    "route_span_details",
]
