"""Litestar plumbing shared by Frontdoor's HTTP services (no domain words here)."""

from .client_address import client_address, network_key
from .health import health_routes
from .json_body import BadBody, read_json
from .json_guard import make_json_guard
from .problem import problem, problem_exception_handlers
from .request_id import RequestIdMiddleware, current_request_id
from .security_headers import SecurityHeadersMiddleware, content_security_policy, origin_source
from .tracing import TracingMiddleware

__all__ = [
    "BadBody",
    "RequestIdMiddleware",
    "SecurityHeadersMiddleware",
    "TracingMiddleware",
    "client_address",
    "content_security_policy",
    "current_request_id",
    "health_routes",
    "make_json_guard",
    "network_key",
    "origin_source",
    "problem",
    "problem_exception_handlers",
    "read_json",
]
