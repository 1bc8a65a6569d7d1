"""The operator CLI, the OpenAPI document, and spans for HTTP and SQL."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle


def run_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
           "FRONTDOOR_KEK": settings.kek, "FRONTDOOR_ENV": "test"}
    return subprocess.run([sys.executable, "-m", "frontdoor_console.cli", *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


async def test_cli_rotates_a_key_and_migrate_is_idempotent(settings: Settings, issuer: AsyncTestClient[Any],
                                                           tenant: TenantHandle, db: Any) -> None:
    before = {k["kid"] for k in (await issuer.get(f"/{tenant.slug}/jwks.json")).json()["keys"]}
    done = run_cli(settings, "rotate-signing-key", tenant.slug)
    assert done.returncode == 0, done.stderr
    after = {k["kid"] for k in (await issuer.get(f"/{tenant.slug}/jwks.json")).json()["keys"]}
    assert before < after and len(after) == 2
    row = await db.fetchrow("SELECT actor_type, details FROM audit_log WHERE tenant_id = $1 AND action = $2",
                            tenant.id, "signing_key.rotated")
    assert row["actor_type"] == "system" and row["details"]["via"] == "cli"
    assert run_cli(settings, "rotate-signing-key", "no-such-tenant-slug").returncode == 1
    again = run_cli(settings, "migrate")
    assert again.returncode == 0 and "none pending" in again.stdout


async def test_openapi_describes_the_management_api(console: AsyncTestClient[Any]) -> None:
    r = await console.get("/api/v1/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    assert spec["openapi"].startswith("3.")
    paths = spec["paths"]
    for path in ("/api/v1/signup", "/api/v1/api-keys", "/api/v1/api-keys/{key_id}", "/api/v1/audit-log",
                 "/api/v1/domains", "/api/v1/domains/{domain}", "/api/v1/domains/{domain}/verify",
                 "/api/v1/domains/{domain}/poppy.json", "/api/v1/domains/{domain}/publish-check",
                 "/api/v1/issuer", "/api/v1/tenant", "/api/v1/signing-keys/rotate"):
        assert path in paths, path
    assert "requestBody" in paths["/api/v1/signup"]["post"]
    assert "/login" not in paths and "/healthz" not in paths


async def test_http_and_sql_spans_are_recorded(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    seen: list[ReadableSpan] = []

    class Capture(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(span)

    from frontdoor_core.telemetry import instrument_libraries
    from opentelemetry.sdk.trace import TracerProvider

    instrument_libraries()  # with no exporter configured the libraries are not instrumented
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # no exporter configured: install one to watch
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    provider.add_span_processor(Capture())  # type: ignore[attr-defined]
    r = await console.get("/api/v1/domains", headers=tenant.auth)
    assert r.status_code == 200
    names = [s.name for s in seen]
    assert "GET /api/v1/domains" in names
    # The maintained asyncpg instrumentation names a span by its SQL verb and marks it postgresql.
    sql = [s for s in seen if (s.attributes or {}).get("db.system") == "postgresql"]
    assert any(s.name == "SELECT" for s in sql), names
    http = next(s for s in seen if s.name == "GET /api/v1/domains")
    attributes = dict(http.attributes or {})
    # Litestar's OpenTelemetry middleware records the status under the stable or the older semantic convention.
    assert attributes.get("http.response.status_code", attributes.get("http.status_code")) == 200, attributes
    # spans carry no credentials
    assert all(tenant.api_key not in str(dict(s.attributes or {})) for s in seen)


async def test_unknown_api_path_is_a_problem_document(console: AsyncTestClient[Any]) -> None:
    r = await console.get("/api/v1/no-such-thing")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "not_found"
