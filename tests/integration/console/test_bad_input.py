"""Bad input on every management API body and path: a clear 4xx problem, nothing changed.

Each fault is applied to an otherwise valid body (the control test proves those bodies
succeed), so the only reason for the refusal is the fault itself. "Nothing changed" is
checked by snapshotting the rows a request could touch, scoped by the caller's tenant.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from frontdoor_core.settings import Settings, load_settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle

PROBLEM_MEMBERS = {"type", "title", "status", "code", "detail"}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    valid: Callable[[], dict[str, Any]]
    wrong_type_field: str
    wrong_type_value: Any


def _signup_body() -> dict[str, Any]:
    slug = unique("bad-")
    return {
        "email": f"{slug}@example.com",
        "password": STRONG_PASSWORD,
        "organization_name": f"Org {slug}",
        "slug": slug,
    }


ENDPOINTS = {
    "signup": Endpoint("POST", "/api/v1/signup", _signup_body, "email", 12345),
    "api-keys": Endpoint("POST", "/api/v1/api-keys", lambda: {"name": "ci"}, "name", 7),
    "issuer": Endpoint(
        "PUT",
        "/api/v1/issuer",
        lambda: {"organization_name": "Renamed Org", "device": {"enabled": True, "scopes": ["poppy:read"]}},
        "organization_name",
        5,
    ),
    "tenant": Endpoint("PATCH", "/api/v1/tenant", lambda: {"slug": unique("new-")}, "slug", 42),
    "domains": Endpoint("POST", "/api/v1/domains", lambda: {"domain": f"{unique('d')}.example.com"}, "domain", 1),
}


async def snapshot(db: Any, tenant_id: str) -> dict[str, Any]:
    """Everything the five endpoints can change, for this tenant (plus global sign-ups)."""
    issuer = await db.fetchrow("SELECT version, settings FROM issuer_settings WHERE tenant_id = $1", tenant_id)
    return {
        "tenants": await db.fetchval("SELECT count(*) FROM tenants"),
        "admins": await db.fetchval("SELECT count(*) FROM admins"),
        "slug": await db.fetchval("SELECT slug FROM tenants WHERE id = $1", tenant_id),
        "api_keys": await db.fetchval("SELECT count(*) FROM api_keys WHERE tenant_id = $1", tenant_id),
        "domains": await db.fetchval("SELECT count(*) FROM domains WHERE tenant_id = $1", tenant_id),
        "audit": await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1", tenant_id),
        "issuer_version": issuer["version"],
        "issuer_settings": json.dumps(issuer["settings"], sort_keys=True),
    }


def assert_problem(r: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].split(";")[0].strip() == "application/problem+json"
    body: dict[str, Any] = r.json()
    assert body.keys() >= PROBLEM_MEMBERS, body
    assert body["status"] == status
    assert body["type"].endswith("/" + body["code"])
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    if code is not None:
        assert body["code"] == code, body
    assert STRONG_PASSWORD not in r.text  # a refusal never echoes what it was sent
    return body


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


def _pad_to(raw: bytes, size: int) -> bytes:
    """``raw`` (a JSON object) padded with insignificant whitespace to exactly ``size`` bytes."""
    assert raw.endswith(b"}") and len(raw) <= size
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def _duplicate(body: dict[str, Any]) -> bytes:
    first = next(iter(body))
    return _json(body)[:-1] + b", " + json.dumps(first).encode() + b': "second"}'


# fault name -> (build raw body and content type from a valid body, status, code)
FAULTS: dict[str, tuple[Callable[[dict[str, Any]], tuple[bytes, str]], int, str]] = {
    "malformed_json": (lambda b: (_json(b)[:-3], "application/json"), 400, "malformed_json"),
    "trailing_garbage": (lambda b: (_json(b) + b" x", "application/json"), 400, "malformed_json"),
    "duplicate_member": (lambda b: (_duplicate(b), "application/json"), 400, "malformed_json"),
    "top_level_array": (lambda b: (_json([b]), "application/json"), 422, "invalid_body"),
    "top_level_string": (lambda b: (b'"hello"', "application/json"), 422, "invalid_body"),
    "text_plain": (lambda b: (_json(b), "text/plain"), 415, "unsupported_media_type"),
    "form_urlencoded": (
        lambda b: (urlencode(b).encode(), "application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    ),
    "multipart": (
        lambda b: (
            b'--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--xx--\r\n',
            "multipart/form-data; boundary=xx",
        ),
        415,
        "unsupported_media_type",
    ),
    "oversized": (lambda b: (_pad_to(_json(b), 65536 + 1), "application/json"), 413, "body_too_large"),
    "unknown_field": (lambda b: (_json({**b, "bogus": 1}), "application/json"), 422, "invalid_body"),
}


async def _send(
    console: AsyncTestClient[Any], ep: Endpoint, tenant: TenantHandle, raw: bytes, ctype: str | None
) -> Any:
    headers = dict(tenant.auth)
    if ctype is not None:
        headers["content-type"] = ctype
    return await console.request(ep.method, ep.path, content=raw, headers=headers)


def _asgi(
    client: AsyncTestClient[Any], method: str, path: str, headers: dict[str, str], chunks: list[bytes]
) -> tuple[int, dict[str, str], bytes]:
    """One request straight through ASGI, on the app's own event loop.

    httpx normalises ``..`` out of URLs and always sends a Content-Length; this does neither,
    so the app sees exactly ``path`` and, with several chunks, a body of unknown length.
    """
    pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    pending = pending or [{"type": "http.request", "body": b"", "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "https",
        "path": path,
        "raw_path": path.encode("utf-8"),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"console.frontdoor.test"),
            *((k.lower().encode(), v.encode()) for k, v in headers.items()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("console.frontdoor.test", 443),
    }
    with client.portal() as portal:
        portal.call(client.app, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


class _RawResponse:
    """Enough of an httpx response for `assert_problem`."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.text = status, headers, body.decode()

    def json(self) -> Any:
        return json.loads(self.text)


# ---------------------------------------------------------------------------------------


def test_default_body_limit_is_64_kib(settings: Settings) -> None:
    assert load_settings({}).max_body_bytes == 65536
    assert settings.max_body_bytes == 65536  # the oversized cases below rely on the default


@pytest.mark.parametrize("name", ENDPOINTS)
async def test_valid_body_is_accepted_and_changes_state(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, name: str
) -> None:
    """Control: the bodies the faults start from are valid, and `snapshot` sees their effect."""
    ep = ENDPOINTS[name]
    before = await snapshot(db, tenant.id)
    r = await _send(console, ep, tenant, _json(ep.valid()), "application/json")
    assert r.status_code in (200, 201), r.text
    assert await snapshot(db, tenant.id) != before


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", ENDPOINTS)
async def test_bad_body_is_refused_and_changes_nothing(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, name: str, fault: str
) -> None:
    ep = ENDPOINTS[name]
    build, status, code = FAULTS[fault]
    raw, ctype = build(ep.valid())
    before = await snapshot(db, tenant.id)
    r = await _send(console, ep, tenant, raw, ctype)
    body = assert_problem(r, status, code)
    if fault == "unknown_field":
        assert "bogus" in json.dumps(body.get("errors", {})), body  # says which field
    assert await snapshot(db, tenant.id) == before


@pytest.mark.parametrize("name", ENDPOINTS)
async def test_wrong_type_names_the_field_and_changes_nothing(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, name: str
) -> None:
    ep = ENDPOINTS[name]
    body = {**ep.valid(), ep.wrong_type_field: ep.wrong_type_value}
    before = await snapshot(db, tenant.id)
    r = await _send(console, ep, tenant, _json(body), "application/json")
    problem = assert_problem(r, 422, "invalid_body")
    assert ep.wrong_type_field in problem["errors"], problem
    assert await snapshot(db, tenant.id) == before


@pytest.mark.parametrize("name", ENDPOINTS)
async def test_missing_content_type_is_415(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, name: str
) -> None:
    ep = ENDPOINTS[name]
    before = await snapshot(db, tenant.id)
    r = await _send(console, ep, tenant, _json(ep.valid()), None)
    assert_problem(r, 415, "unsupported_media_type")
    assert await snapshot(db, tenant.id) == before


@pytest.mark.parametrize("name", ENDPOINTS)
async def test_empty_body_is_a_clear_4xx(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, name: str
) -> None:
    ep = ENDPOINTS[name]
    before = await snapshot(db, tenant.id)
    r = await _send(console, ep, tenant, b"", "application/json")
    assert r.status_code in (400, 422), r.text
    assert_problem(r, r.status_code)
    assert await snapshot(db, tenant.id) == before


@pytest.mark.parametrize("name", ENDPOINTS)
async def test_body_size_limit_is_exact(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, settings: Settings, name: str
) -> None:
    """At the limit the body is parsed (and refused for its unknown field); one byte more is 413."""
    ep = ENDPOINTS[name]
    raw = _json({**ep.valid(), "bogus": 1})
    before = await snapshot(db, tenant.id)
    at_limit = await _send(console, ep, tenant, _pad_to(raw, settings.max_body_bytes), "application/json")
    assert_problem(at_limit, 422, "invalid_body")
    over = await _send(console, ep, tenant, _pad_to(raw, settings.max_body_bytes + 1), "application/json")
    assert_problem(over, 413, "body_too_large")
    assert await snapshot(db, tenant.id) == before


@pytest.mark.parametrize("name", ENDPOINTS)
async def test_oversized_body_without_content_length_is_413(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, settings: Settings, name: str
) -> None:
    """A streamed (chunked) body is cut off at the limit too, not only one that declares its size."""
    ep = ENDPOINTS[name]
    raw = _pad_to(_json(ep.valid()), settings.max_body_bytes + 4096)
    chunks = [raw[i : i + 8192] for i in range(0, len(raw), 8192)]
    before = await snapshot(db, tenant.id)
    status, headers, body = _asgi(
        console, ep.method, ep.path, {**tenant.auth, "content-type": "application/json"}, chunks
    )
    assert_problem(_RawResponse(status, headers, body), 413, "body_too_large")
    assert await snapshot(db, tenant.id) == before


async def test_charset_parameter_and_json_suffix_are_accepted(
    console: AsyncTestClient[Any], tenant: TenantHandle
) -> None:
    """The media-type check is not over-strict: parameters and ``+json`` types pass."""
    for ctype in ("application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"):
        r = await console.post(
            "/api/v1/api-keys", content=b'{"name": "ct"}', headers={**tenant.auth, "content-type": ctype}
        )
        assert r.status_code == 201, (ctype, r.text)


@pytest.mark.parametrize(
    "body",
    [
        {"organization_name": "Org", "device": {"enabled": True, "scopes": ["poppy:read"], "bogus": 1}},
        {"organization_name": "Org", "apis": [{"type": "openapi", "url": "https://api.example.com", "bogus": 1}]},
    ],
    ids=["sign_in_type", "api_entry"],
)
async def test_unknown_nested_field_in_issuer_settings_is_refused(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, body: dict[str, Any]
) -> None:
    before = await snapshot(db, tenant.id)
    r = await console.put("/api/v1/issuer", json=body, headers=tenant.auth)
    problem = assert_problem(r, 422, "invalid_body")
    assert "bogus" in json.dumps(problem.get("errors", {}))
    assert await snapshot(db, tenant.id) == before


@pytest.mark.parametrize(
    "body",
    [
        {"organization_name": "Org", "session_lifetime_s": "3600"},
        {"organization_name": "Org", "device": {"enabled": "true", "scopes": ["poppy:read"]}},
    ],
    ids=["string_for_int", "string_for_bool"],
)
async def test_string_for_number_or_bool_is_refused(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, body: dict[str, Any]
) -> None:
    before = await snapshot(db, tenant.id)
    r = await console.put("/api/v1/issuer", json=body, headers=tenant.auth)
    assert_problem(r, 422, "invalid_body")
    assert await snapshot(db, tenant.id) == before


NUL_REQUESTS: dict[str, tuple[str, str, Any]] = {
    "api_key_name": ("POST", "/api/v1/api-keys", {"name": "ci\u0000"}),
    "signup_organization": ("POST", "/api/v1/signup", lambda: {**_signup_body(), "organization_name": "Org\u0000"}),
    "issuer_organization": ("PUT", "/api/v1/issuer", {"organization_name": "Org\u0000"}),
    "issuer_scope_description": (
        "PUT",
        "/api/v1/issuer",
        {"organization_name": "Org", "custom_scopes": {"orders:read": "Read\u0000"}},
    ),
    "api_key_id_path": ("DELETE", "/api/v1/api-keys/key_%00", None),
    "audit_log_query": ("GET", "/api/v1/audit-log?action=%00", None),
}


@pytest.mark.parametrize("case", NUL_REQUESTS)
async def test_nul_character_is_a_4xx_not_a_crash(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, case: str
) -> None:
    method, path, body = NUL_REQUESTS[case]
    if callable(body):
        body = body()
    before = await snapshot(db, tenant.id)
    r = await console.request(method, path, headers=tenant.auth, json=body)
    assert 400 <= r.status_code < 500, r.text
    assert_problem(r, r.status_code)
    assert await snapshot(db, tenant.id) == before


GARBAGE_SEGMENTS = [
    "..",
    ".",
    "a b",
    "x" * 5000,
    "%2e%2e",
    "\u00e9" * 300,
    "-",
    "_.example.com",
    "\u0000",
    "example.com%2F..",
    "<script>",
]


@pytest.mark.parametrize("segment", GARBAGE_SEGMENTS, ids=lambda s: repr(s[:12]))
@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("GET", "/api/v1/domains/{}"),
        ("DELETE", "/api/v1/domains/{}"),
        ("POST", "/api/v1/domains/{}/verify"),
    ],
)
async def test_garbage_domain_in_path_is_a_clear_4xx(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, method: str, template: str, segment: str
) -> None:
    before = await snapshot(db, tenant.id)
    status, headers, body = _asgi(console, method, template.format(segment), tenant.auth, [])
    assert status in (400, 404, 422), body[:300]
    assert_problem(_RawResponse(status, headers, body), status)
    assert await snapshot(db, tenant.id) == before


async def test_literal_dot_dot_is_not_resolved_to_another_route(
    console: AsyncTestClient[Any], tenant: TenantHandle
) -> None:
    """``/api/v1/domains/..`` is a (bad) domain, never the parent path (the OpenAPI document)."""
    status, _, body = _asgi(console, "GET", "/api/v1/domains/..", tenant.auth, [])
    assert status == 422, body[:300]
    assert b"openapi" not in body
