"""Strict ``application/x-www-form-urlencoded`` bodies for OAuth endpoints."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from frontdoor_protocol.errors import ProtocolError
from litestar import Request

__all__ = ["parse_form", "read_form"]


async def read_form(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The form's parameters; a repeated parameter or another media type is invalid_request.

    RFC 6749 §3.2: parameters sent without a value are treated as omitted, and request
    parameters must not be included more than once.
    """
    return parse_form(request.headers.get("content-type", ""), await request.body())


def parse_form(content_type: str, raw: bytes) -> dict[str, str]:
    """:func:`read_form` on a body already read (the lean introspection route)."""
    ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise ProtocolError("invalid_request", "Send the request as application/x-www-form-urlencoded.")
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(raw), max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("invalid_request", "The form body is malformed.") from None
    out: dict[str, str] = {}
    for key, value in pairs:
        if key in out:
            raise ProtocolError("invalid_request", "A parameter is repeated.")
        if "\x00" in key or "\x00" in value:
            raise ProtocolError("invalid_request", "The form body is malformed.")
        if value != "":
            out[key] = value
    return out
