"""The problem responses (RFC 9457) the management API declares in its OpenAPI document.

Every refusal is ``application/problem+json`` (``frontdoor_httpkit.problem``); declaring them
replaces Litestar's default 400, whose ``application/json`` shape the API never sends.
"""

from __future__ import annotations

import msgspec
from litestar.openapi import ResponseSpec

__all__ = ["PROBLEMS", "PUBLIC_PROBLEMS", "Problem"]


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    type: str
    title: str
    status: int
    code: str
    detail: str
    errors: dict[str, str] | None = None
    request_id: str | None = None


def _responses(statuses: dict[int, str]) -> dict[int, ResponseSpec]:
    return {status: ResponseSpec(data_container=Problem, media_type="application/problem+json",
                                 description=description, generate_examples=False)
            for status, description in statuses.items()}


_COMMON = {
    400: "Malformed request (e.g. a body that is not JSON)",
    404: "No such resource in your tenant",
    409: "Conflicts with the current state",
    413: "Request body too large",
    415: "Unsupported media type (send application/json)",
    422: "Invalid input; `errors` names the fields",
    429: "Too many requests; see Retry-After",
    503: "Temporarily unavailable; see Retry-After",
}
#: Refusals of the authenticated management API.
PROBLEMS = _responses({**_COMMON, 401: "Missing or invalid API key", 403: "The API key may not do this"})
#: Refusals of the unauthenticated endpoints (sign-up).
PUBLIC_PROBLEMS = _responses(_COMMON)
