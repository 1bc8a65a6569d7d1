"""How the ledger refuses a company: RFC 9457 problem details on ``{ledger}/{slug}/v1/...``.

The company-facing ledger API (``/v1/operations``, ``/v1/conversations``) answers every
refusal as ``application/problem+json`` ``{type, title, status, code, detail, request_id}``,
the management API's shape. The agent-facing endpoints (``/operations/{id}``,
``/conversations``) keep the protocol's ``{"error", "error_description"}`` with its
challenges; :func:`is_company_path` tells the two apart for the app-wide handlers.
"""

from __future__ import annotations

from typing import Any

from frontdoor_httpkit import problem
from litestar import Response

__all__ = ["COMPANY_STATUS", "as_company_problem", "company_problem", "is_company_path"]

_NO_STORE = {"Cache-Control": "no-store"}
#: A use case's refusal kind -> status, on the ledger API (its statuses predate the shape).
COMPANY_STATUS = {"invalid": 400, "not_found": 404, "conflict": 409, "forbidden": 403, "unavailable": 503,
                  "rate_limited": 429}
# Members of a protocol refusal a company may act on, kept as problem extension members.
_KEPT = ("operation", "scope", "extension", "conversation_id")
# Headers of a protocol refusal that still mean something to a company's server.
_KEPT_HEADERS = ("retry-after",)


def is_company_path(path: str) -> bool:
    """Whether ``path`` is under ``/{slug}/v1/`` (the company-facing API)."""
    parts = path.split("/", 3)
    return len(parts) > 2 and parts[2] == "v1"


def company_problem(status: int, code: str, detail: str, headers: dict[str, str] | None = None,
                    extra: dict[str, Any] | None = None) -> Response[dict[str, Any]]:
    """A problem-details refusal of the ledger API, never cached."""
    return problem(status, code, detail, headers={**_NO_STORE, **(headers or {})}, extra=extra)


def as_company_problem(response: Response[Any]) -> Response[Any]:
    """A protocol-shaped refusal (shared code with the agents' endpoint) as the company's problem.

    Success answers pass unchanged; ``WWW-Authenticate`` (the agent's DPoP challenge) is dropped.
    """
    status = response.status_code or 200
    content = response.content
    if status < 400 or not isinstance(content, dict):
        return response
    code = content.get("error")
    description = content.get("error_description")
    headers = {name: value for name, value in response.headers.items() if name.lower() in _KEPT_HEADERS}
    extra = {name: content[name] for name in _KEPT if content.get(name) is not None}
    return company_problem(status, code if isinstance(code, str) and code else "refused",
                           description if isinstance(description, str) and description else "Refused.",
                           headers=headers, extra=extra or None)
