"""``GET /openapi.json``: the OpenAPI 3.1 description of the ledger API companies call.

Request bodies are the very msgspec structs the handlers decode, so the description cannot
drift from what is accepted; the operation object is described once and shared.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Response, get

from .company_api import OutcomeBody, ProposeBody, ReviseBody, WebConfirmBody

__all__ = ["openapi_document", "routes"]

_OPERATION: dict[str, Any] = {
    "type": "object",
    "description": "The operation object of the PAP Operations extension v1 (§3).",
    "required": ["operation_id", "revision", "state", "summary", "user_approval_required", "confirmation", "result"],
    "properties": {
        "operation_id": {"type": "string"},
        "revision": {"type": "integer", "minimum": 1},
        "state": {"enum": ["proposed", "in_progress", "succeeded", "failed", "cancelled", "expired"]},
        "summary": {"type": "string"},
        "terms": {"type": "object"},
        "expires_at": {"type": "string", "format": "date-time"},
        "user_approval_required": {"type": "boolean"},
        "url": {"type": "string", "format": "uri"},
        "confirmation": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
            "revision": {"type": "integer"}, "approved_by": {"enum": ["user", "standing_permission"]},
            "confirmed_at": {"type": "string", "format": "date-time"}}}]},
        "result": {"anyOf": [{"type": "null"}, {"type": "object", "required": ["summary"], "properties": {
            "summary": {"type": "string"}, "data": {"type": "object"}}}]},
    },
}
_ERROR: dict[str, Any] = {"type": "object", "required": ["error"], "properties": {
    "error": {"type": "string"}, "error_description": {"type": "string"}}}


def openapi_document() -> dict[str, Any]:
    """The document (built once per process)."""
    (body_schemas,), components = msgspec.json.schema_components(
        [tuple[ProposeBody, ReviseBody, OutcomeBody, WebConfirmBody]], ref_template="#/components/schemas/{name}")
    del body_schemas
    components.update({"Operation": _OPERATION, "Error": _ERROR})

    def ref(name: str) -> dict[str, str]:
        return {"$ref": f"#/components/schemas/{name}"}

    wrapped = {"type": "object", "required": ["operation"], "properties": {"operation": ref("Operation")}}
    record = {"type": "object", "properties": {"operation": ref("Operation"), "details": {"type": "object"}}}
    errors = {str(code): {"description": text, "content": {"application/json": {"schema": ref("Error")}}}
              for code, text in ((400, "invalid_request"), (401, "invalid_client: not this tenant's credential"),
                                 (403, "extension_required"), (404, "operation_not_found / unknown_kind"),
                                 (409, "session_inactive / not_proposed / outcome_conflict / terms_changed"),
                                 (413, "the body is larger than FRONTDOOR_MAX_BODY_BYTES"),
                                 (503, "temporarily_unavailable: retry after Retry-After"))}

    def body(name: str) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": ref(name)}}}

    def answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    op_id = {"name": "operation_id", "in": "path", "required": True, "schema": {"type": "string"}}
    slug = {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Frontdoor ledger API", "version": "1",
                 "description": "Propose, revise, read and settle operations (docs/operations.md)."},
        "components": {"schemas": components, "securitySchemes": {
            "resourceCredential": {"type": "http", "scheme": "bearer",
                                   "description": "A resource-server credential (fdrs_…) of the tenant."}}},
        "security": [{"resourceCredential": []}],
        "paths": {
            "/{slug}/v1/operations": {
                "parameters": [slug],
                "post": {"summary": "Propose an operation", "requestBody": body("ProposeBody"),
                         "responses": {"201": answer("A new operation", wrapped),
                                       "200": answer("The open operation with the same action_key", wrapped),
                                       **errors}},
                "get": {"summary": "List operations, newest first",
                        "parameters": [{"name": n, "in": "query", "schema": {"type": "string"}} for n in (
                            "state", "kind", "account", "client_id", "since", "until", "limit", "cursor",
                            "needs_attention")],
                        "responses": {"200": answer("A page", {"type": "object", "properties": {
                            "items": {"type": "array", "items": record},
                            "next_cursor": {"type": ["string", "null"]}}}), **errors}},
            },
            "/{slug}/v1/operations/{operation_id}": {
                "parameters": [slug, op_id],
                "get": {"summary": "Read an operation", "responses": {"200": answer("The operation", record),
                                                                       **errors}},
            },
            "/{slug}/v1/operations/{operation_id}/revisions": {
                "parameters": [slug, op_id],
                "post": {"summary": "Issue the next revision", "requestBody": body("ReviseBody"),
                         "responses": {"200": answer("The revised operation", wrapped), **errors}},
            },
            "/{slug}/v1/operations/{operation_id}/outcome": {
                "parameters": [slug, op_id],
                "post": {"summary": "Report the outcome of an accepted perform", "requestBody": body("OutcomeBody"),
                         "responses": {"200": answer("The final operation", wrapped), **errors}},
            },
            "/{slug}/v1/operations/{operation_id}/confirm": {
                "parameters": [slug, op_id],
                "post": {"summary": "Confirm on the company's own website (Operations §4.4)",
                         "requestBody": body("WebConfirmBody"),
                         "responses": {"200": answer("The operation as it now is", wrapped), **errors}},
            },
        },
    }


_DOCUMENT: dict[str, Any] | None = None


@get("/openapi.json", include_in_schema=False)
async def openapi_json() -> Response[dict[str, Any]]:
    global _DOCUMENT  # noqa: PLW0603 - built once, immutable afterwards
    if _DOCUMENT is None:
        _DOCUMENT = openapi_document()
    return Response(_DOCUMENT, headers={"Cache-Control": "public, max-age=300"})


routes = [openapi_json]
