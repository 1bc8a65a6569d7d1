"""A ``before_request`` hook: JSON APIs get strict bodies before Litestar parses them.

Litestar decodes ``data: Struct`` with msgspec, which silently keeps the last of two
duplicate members. This hook runs first and refuses, with one consistent answer per
fault: a body that is not ``application/json`` (415), is not JSON or repeats a member
(400), or is not an object (422). The body is cached on the request, so handlers still
parse it (and unknown fields are refused there by the structs).
"""

from __future__ import annotations

from typing import Any

from frontdoor_protocol.strict_json import MalformedJSON, loads
from litestar import Request

from .json_body import BadBody

__all__ = ["make_json_guard"]


def make_json_guard(prefixes: tuple[str, ...]) -> Any:
    """A hook checking bodies of POST/PUT/PATCH requests under ``prefixes``."""

    async def guard(request: Request[Any, Any, Any]) -> None:
        if request.method not in ("POST", "PUT", "PATCH") or not request.url.path.startswith(prefixes):
            return
        raw = await request.body()
        if not raw.strip():
            return
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json" and not ctype.endswith("+json"):
            raise BadBody("unsupported_media_type", "Send the body as application/json.", kind="unsupported_media_type")
        try:
            data = loads(raw)
        except MalformedJSON as exc:
            text = "duplicate object member" if "duplicate" in str(exc) else "malformed JSON"
            raise BadBody("malformed_json", f"The body is not valid JSON ({text}).") from None
        if not isinstance(data, dict):
            raise BadBody("invalid_body", "The body must be a JSON object.", kind="invalid")

    return guard
