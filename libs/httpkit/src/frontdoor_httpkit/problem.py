"""RFC 9457 problem details for the management API, and the domain-error table."""

from __future__ import annotations

from typing import Any

import structlog
from frontdoor_core.errors import DomainError
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotAuthorizedException, ValidationException

from .request_id import current_request_id

__all__ = ["PROBLEM_TYPE_BASE", "STATUS_BY_KIND", "problem", "problem_exception_handlers"]

PROBLEM_TYPE_BASE = "https://frontdoor.dev/problems/"
STATUS_BY_KIND = {
    "invalid": 422,
    "not_found": 404,
    "conflict": 409,
    "forbidden": 403,
    "rate_limited": 429,
    "unavailable": 503,
    "bad_request": 400,
    "unsupported_media_type": 415,
    "unauthorized": 401,
}
_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Unprocessable content",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}
_log = structlog.get_logger("frontdoor.http")


def problem(
    status: int, code: str, detail: str, *, fields: dict[str, str] | None = None,
    headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None,
) -> Response[dict[str, Any]]:
    """A problem-details response (``application/problem+json``)."""
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE_BASE + code,
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "code": code,
        "detail": detail,
    }
    if fields:
        body["errors"] = fields
    if extra:
        body.update(extra)
    rid = current_request_id()
    if rid:
        body["request_id"] = rid
    return Response(body, status_code=status, media_type="application/problem+json", headers=headers or {})


def _domain(_: Request[Any, Any, Any], exc: DomainError) -> Response[dict[str, Any]]:
    status = STATUS_BY_KIND.get(exc.kind, 400)
    headers = {}
    retry = getattr(exc, "retry_after", None)
    if retry is not None:
        headers["Retry-After"] = str(retry)
    return problem(status, exc.code, exc.detail, fields=exc.fields, headers=headers)


def _http(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    code = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
            413: "body_too_large", 415: "unsupported_media_type", 429: "rate_limited"}.get(status, "http_error")
    headers = dict(exc.headers or {})
    if isinstance(exc, NotAuthorizedException):
        headers.setdefault("WWW-Authenticate", 'Bearer realm="frontdoor"')
    detail = exc.detail if status < 500 and isinstance(exc.detail, str) else _TITLES.get(status, "Error")
    if isinstance(exc, ValidationException):
        fields: dict[str, str] = {}
        for item in exc.extra if isinstance(exc.extra, list) else []:
            if isinstance(item, dict):
                key = str(item.get("key") or item.get("source") or "body")
                fields[key] = str(item.get("message", "invalid"))[:200]
        return problem(422, "invalid_body", "The request does not have the expected shape.", fields=fields)
    return problem(status, code, detail, headers=headers)


def _crash(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    # The route template, never the raw path: a path may carry a bearer value (an invitation token).
    route = str(request.scope.get("path_template") or "(no route)")
    _log.error("unhandled_exception", route=route, method=request.method, exc_info=exc)
    return problem(500, "internal_error", "Something went wrong on our side. Quote the request_id if you contact us.")


def problem_exception_handlers() -> dict[Any, Any]:
    """Exception handlers mapping every failure to one problem shape."""
    return {DomainError: _domain, HTTPException: _http, Exception: _crash}
