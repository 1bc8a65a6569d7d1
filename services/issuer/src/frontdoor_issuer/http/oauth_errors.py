"""How protocol refusals look on the wire at OAuth endpoints (RFC 6749 §5.2)."""

from __future__ import annotations

from typing import Any

from frontdoor_protocol.errors import ProtocolError
from litestar import Response

__all__ = ["NO_STORE", "UNAVAILABLE_BODY", "oauth_error", "unavailable"]

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
UNAVAILABLE_BODY = {"error": "temporarily_unavailable", "error_description": "Temporarily unavailable; retry shortly."}


def oauth_error(error: ProtocolError, headers: dict[str, str] | None = None) -> Response[dict[str, Any]]:
    """``{"error", "error_description"}`` with its status; never echoes input."""
    return Response(error.to_body(), status_code=error.status, headers={**NO_STORE, **(headers or {})})


def unavailable(retry_after: int = 5) -> Response[dict[str, Any]]:
    """Fail closed: 503 with ``Retry-After``."""
    return Response(UNAVAILABLE_BODY,
                    status_code=503, headers={**NO_STORE, "Retry-After": str(retry_after)})
