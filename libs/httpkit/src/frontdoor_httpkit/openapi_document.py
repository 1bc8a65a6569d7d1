"""An app's OpenAPI document as Litestar generates it from the route handlers, plus the
request bodies of handlers that decode their own bodies.

Frontdoor's protocol and ledger handlers read ``request.body()`` and decode it with msgspec
themselves (so a refusal never quotes the input, and authentication runs before the body is
parsed); Litestar documents a body only for a ``data`` parameter. :func:`described` attaches
the struct a handler decodes (and its summary, responses, security) to a copy of the
handler; :func:`openapi_document` adds each such body, as msgspec's JSON Schema of that very
struct, to Litestar's document. :class:`DocumentPlugin` serves the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from copy import copy
from typing import Any

import msgspec
from litestar import Litestar, MediaType, Request
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import ResponseSpec
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.routes import HTTPRoute

__all__ = ["DocumentPlugin", "Problem", "ProtocolError", "described", "error_responses", "openapi_document",
           "problem_responses"]

_BODY = "openapi_request_body"
_REF = "#/components/schemas/{name}"


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """An RFC 9457 problem (``application/problem+json``); routes may add members (``operation``)."""

    type: str
    title: str
    status: int
    code: str
    detail: str
    errors: dict[str, str] | None = None
    request_id: str | None = None


class ProtocolError(msgspec.Struct, frozen=True, kw_only=True):
    """A protocol refusal (RFC 6749 §5.2 shape); routes may add members (``scope``, ``operation``)."""

    error: str
    error_description: str | None = None


def problem_responses(statuses: Mapping[int, str]) -> dict[int, ResponseSpec]:
    """``application/problem+json`` refusals, one per status, with their descriptions."""
    return {status: ResponseSpec(data_container=Problem, media_type="application/problem+json",
                                 description=text, generate_examples=False)
            for status, text in statuses.items()}


def error_responses(statuses: Mapping[int, str]) -> dict[int, ResponseSpec]:
    """``{"error", "error_description"}`` refusals (``application/json``), one per status."""
    return {status: ResponseSpec(data_container=ProtocolError, description=text, generate_examples=False)
            for status, text in statuses.items()}


def described(handler: HTTPRouteHandler, *, summary: str | None = None, description: str | None = None,
              tags: Sequence[str] | None = None, security: Sequence[dict[str, list[str]]] | None = None,
              responses: Mapping[int, ResponseSpec] | None = None, body: type[Any] | None = None,
              body_media_type: str = "application/json") -> HTTPRouteHandler:
    """A copy of ``handler`` carrying its OpenAPI description (the handler itself is unchanged).

    Args:
        body: The msgspec struct the handler decodes from its body, if any.
        body_media_type: How that body is sent (JSON, or a form for the OAuth endpoints).
    """
    out = copy(handler)
    if summary is not None:
        out.summary = summary
    if description is not None:
        out.description = description
    if tags is not None:
        out.tags = list(tags)
    if security is not None:
        out.security = list(security)
    if responses is not None:
        out.responses = dict(responses)
    out.opt = {**handler.opt, **({_BODY: (body, body_media_type)} if body is not None else {})}
    return out


def openapi_document(app: Litestar) -> dict[str, Any]:
    """Litestar's document for ``app`` with the declared request bodies (built once per app)."""
    cached = getattr(app.state, "_openapi_document", None)
    if isinstance(cached, dict):
        return cached
    doc: dict[str, Any] = app.openapi_schema.to_schema()
    bodies: list[tuple[str, str, tuple[type[Any], str]]] = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            body = handler.opt.get(_BODY)
            if body is not None and handler.resolve_include_in_schema():
                bodies.extend((route.path_format, method.lower(), body) for method in handler.http_methods)
    if bodies:
        _, components = msgspec.json.schema_components([b for _, _, (b, _) in bodies], ref_template=_REF)
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in components.items():
            if schemas.setdefault(name, schema) != schema:
                raise ValueError(f"two different schemas named {name}")
        for path, method, (body, media_type) in bodies:
            doc["paths"][path][method]["requestBody"] = {
                "required": True, "content": {media_type: {"schema": {"$ref": _REF.format(name=body.__name__)}}}}
        doc["components"]["schemas"] = dict(sorted(schemas.items()))
    app.state._openapi_document = doc
    return doc


class DocumentPlugin(OpenAPIRenderPlugin):
    """Serves :func:`openapi_document` (with the request bodies) as JSON."""

    def __init__(self, *, path: str = "/openapi.json") -> None:
        super().__init__(path=path, media_type=MediaType.JSON)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return msgspec.json.encode(openapi_document(request.app))
