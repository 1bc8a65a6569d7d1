"""Strict JSON request bodies: right content type, size-capped, no duplicate members."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from frontdoor_core.errors import DomainError
from frontdoor_protocol.strict_json import MalformedJSON, loads
from litestar import Request

__all__ = ["BadBody", "read_json"]

T = TypeVar("T")


class BadBody(DomainError):
    """The body is not the JSON we accept (400, 415 or 422)."""

    def __init__(self, code: str, detail: str, *, kind: str = "bad_request", fields: dict[str, str] | None = None) -> None:
        super().__init__(code, detail, fields=fields)
        self.kind = kind


async def read_json(request: Request[Any, Any, Any], into: type[T]) -> T:
    """Parse the body into ``into`` (a msgspec struct that forbids unknown fields).

    Raises:
        BadBody: 415 wrong media type, 400 malformed or duplicate members, 422 wrong shape.
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise BadBody("unsupported_media_type", "Send the body as application/json.", kind="unsupported_media_type")
    raw = await request.body()
    try:
        data = loads(raw)
    except MalformedJSON as exc:
        reason = getattr(exc, "reason", "syntax")
        text = "duplicate object member" if "duplicate" in str(reason) else "malformed JSON"
        raise BadBody("malformed_json", f"The body is not valid JSON ({text}).") from None
    if not isinstance(data, dict):
        raise BadBody("invalid_body", "The body must be a JSON object.", kind="invalid")
    try:
        return msgspec.convert(data, into)
    except msgspec.ValidationError as exc:
        message = str(exc)
        field = message.rsplit("`$.", 1)[-1].rstrip("`") if "`$." in message else "body"
        reason = message.split(" - at", maxsplit=1)[0]
        if reason.startswith("Object contains unknown field"):
            reason = "unknown field"
            field = message.split("`")[1] if "`" in message else field
        raise BadBody("invalid_body", "The body does not have the expected shape.", kind="invalid",
                      fields={field: reason}) from None
