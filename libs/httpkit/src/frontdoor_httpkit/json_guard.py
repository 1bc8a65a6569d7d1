"""A ``before_request`` hook: JSON APIs get strict bodies before Litestar parses them.

Litestar decodes ``data: Struct`` with msgspec, which silently keeps the last of two
duplicate members. This hook runs first and refuses, with one consistent answer per
fault: a body that is not ``application/json`` (415), is not JSON or repeats a member
(400), or is not an object (422). The body is cached on the request, so handlers still
parse it (and unknown fields are refused there by the structs).
"""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_protocol.strict_json import MalformedJSON, loads
from litestar import Request

from .json_body import BadBody

__all__ = ["has_nul", "make_json_guard", "url_has_nul"]


def make_json_guard(prefixes: tuple[str, ...]) -> Any:
    """A hook checking bodies of POST/PUT/PATCH requests under ``prefixes``."""

    async def guard(request: Request[Any, Any, Any]) -> None:
        if not request.url.path.startswith(prefixes):
            return
        if url_has_nul(request):
            raise BadBody("invalid_request", "The URL must not contain NUL characters.")
        if request.method not in ("POST", "PUT", "PATCH"):
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
        if has_nul(data):
            raise BadBody("invalid_body", "Strings must not contain NUL characters.", kind="invalid")
        target = _body_type(request)
        if target is not None:
            # Litestar converts bodies leniently ("3600" becomes 3600); the API promises JSON
            # types as documented, so check strictly first and answer with the field at fault.
            try:
                msgspec.convert(data, target, strict=True)
            except msgspec.ValidationError as exc:
                raise BadBody("invalid_body", "The body does not have the expected shape.", kind="invalid",
                              fields=_field_error(str(exc))) from None

    return guard


def url_has_nul(request: Request[Any, Any, Any]) -> bool:
    """Whether the request's path or query carries a NUL character (PostgreSQL's text cannot store one)."""
    query = request.scope.get("query_string", b"")
    return "\x00" in request.url.path or b"%00" in query or b"\x00" in query


def has_nul(value: Any) -> bool:
    """Whether a NUL character is anywhere in a decoded JSON value, keys included (jsonb and text refuse one)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def _body_type(request: Request[Any, Any, Any]) -> Any:
    try:
        param = request.route_handler.parsed_fn_signature.parameters.get("data")
    except AttributeError:
        return None
    return None if param is None else param.annotation


def _field_error(message: str) -> dict[str, str]:
    reason, _, where = message.partition(" - at `$")
    field = where.rstrip("`").lstrip(".") or "body"
    if reason.startswith("Object contains unknown field"):
        field = reason.split("`")[1] if "`" in reason else field
        reason = "unknown field"
    return {field: reason}
