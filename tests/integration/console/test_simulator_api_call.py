"""The simulator's call to the company's first listed API (issue #19 §1), at the wire level.

Northwind (the example company, in-process, protected by the real sdk, introspecting at the
real issuer) is the company: listed first as OpenAPI, the simulator fetches its OpenAPI
document and calls its first GET operation with the signed-out Session's token and a DPoP
proof (PAP-6-03); listed first as MCP, it asks the issuer for a token for the server
(RFC 8707) and sends ``tools/list`` (PAP-6-04). A loopback company that refuses shows its
``WWW-Authenticate`` parsed, and a finding unless the refusal asks for a sign-in.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig, create_app

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_simulator import codes, route_to, run, statuses, steps, wire
from tests.integration.issuer.test_pap10_publish_check import publish_all
from tests.integration.northwind.test_account_page import forwarding_client
from tests.integration.signin.conftest import configure, resource_credential
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb


def _step(page: str, key: str) -> str:
    block = page[page.index(f'data-step="{key}"'):]
    return block[:block.index("</article>")]


async def _company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle, dns: LocalDNS,
                   web: MockWeb, apis: list[dict[str, Any]]) -> str:
    """A verified domain whose issuer settings list ``apis`` (``{origin}`` filled in); its origin."""
    domain = await verified_domain(console, t, dns)
    origin = f"https://{domain}"
    await configure(console, t, apis=[{**a, "url": a["url"].format(origin=origin)} for a in apis])
    await publish_all(console, issuer, t, web, domain)
    await wire(web, console, issuer, t)
    return origin


@pytest.fixture
async def northwind(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                    dns: LocalDNS, web: MockWeb, clock: ShiftableClock, request: pytest.FixtureRequest
                    ) -> AsyncIterator[str]:
    """Northwind on the tenant's verified domain, its OpenAPI API and MCP server listed (``param`` first)."""
    listed = [{"type": "openapi", "url": "{origin}/openapi.json", "description": "Products and orders"},
              {"type": "mcp", "url": "{origin}/mcp", "description": "Northwind's MCP server"}]
    if request.param == "mcp":
        listed.reverse()
    origin = await _company(console, issuer, tenant, dns, web, listed)
    credential = await resource_credential(console, tenant)
    domain = origin.removeprefix("https://")
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    async with forwarding_client(issuer) as to_issuer:
        app = create_app(NorthwindConfig(issuer=tenant.issuer, credential=credential, public_url=origin, poppy=doc,
                                         http_client=to_issuer, clock=clock))
        async with AsyncTestClient(app=app, base_url=origin) as company:
            for path in ("/openapi.json", "/api/products", "/api/orders", "/mcp"):
                route_to(web, company, origin + path)
            yield origin


@pytest.mark.parametrize("northwind", ["openapi"], indirect=True)
async def test_the_first_openapi_operation_is_called_with_the_session(
    console: AsyncTestClient[Any], tenant: TenantHandle, web: MockWeb, northwind: str,
) -> None:
    r = await run(console, tenant)
    ran = steps(r.text)
    assert ran["session"] == "yes" and ran["api"] == "yes", (codes(r.text), _step(r.text, "api"))
    assert statuses(r.text)["signin"] == "informational"  # the run goes on after the call
    api = _step(r.text, "api")
    assert f"GET {northwind}/api/products answered 200" in api
    assert f"<code>GET {northwind}/openapi.json</code>" in api and f"<code>GET {northwind}/api/products</code>" in api
    called = [q for q in web.requests if q.method == "GET" and str(q.url) == f"{northwind}/api/products"]
    assert len(called) == 1
    token = called[0].headers["authorization"]
    assert token.startswith("DPoP ") and "dpop" in called[0].headers
    assert token.split(" ", 1)[1] not in r.text and called[0].headers["dpop"] not in r.text
    assert "Authorization: DPoP [redacted]" in api and "&#34;htm&#34;: &#34;GET&#34;" in api
    assert "Espresso" in api or "sku" in api  # Northwind's answer (its products) is shown


@pytest.mark.parametrize("northwind", ["mcp"], indirect=True)
async def test_an_mcp_server_first_gets_a_resource_token_and_tools_list(
    console: AsyncTestClient[Any], tenant: TenantHandle, web: MockWeb, northwind: str, db: Any,
) -> None:
    r = await run(console, tenant)
    ran = steps(r.text)
    assert ran["api"] == "yes", (codes(r.text), _step(r.text, "api"))
    api = _step(r.text, "api")
    assert f"MCP tools/list at {northwind}/mcp answered 200" in api
    listed = re.search(r"(\d+) tool\(s\) listed", api)
    assert listed is not None and int(listed.group(1)) >= 1 and "search_products" in api
    # The token for the MCP server came from the same Session (session_id), for that URL (RFC 8707).
    token_requests = [httpx.QueryParams(q.content.decode()) for q in web.requests
                      if q.method == "POST" and q.url.path == f"/{tenant.slug}/oauth/token"]
    assert [p.get("resource") for p in token_requests] == [None, f"{northwind}/mcp"]
    assert token_requests[1]["session_id"].startswith("ses_")
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1", tenant.id) == 1
    mcp = [q for q in web.requests if q.method == "POST" and str(q.url) == f"{northwind}/mcp"]
    assert len(mcp) == 1 and b'"tools/list"' in mcp[0].content


def _refusing(web: MockWeb, origin: str, status: int, challenge: str) -> None:
    web.serve(f"{origin}/openapi.json", json={"openapi": "3.1.0", "servers": [{"url": origin}], "paths": {
        "/v1/items/{id}": {"get": {}}, "/v1/orders": {"post": {}}, "/v1/items": {"get": {}}}})
    web.serve(f"{origin}/v1/items", status=status, json={"error": "refused"}, headers={"www-authenticate": challenge})


async def test_a_refusal_shows_its_challenge_parsed_and_gives_a_finding(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    origin = await _company(console, issuer, tenant, dns, web, [{"type": "openapi", "url": "{origin}/openapi.json",
                                                                  "description": "Items"}])
    _refusing(web, origin, 401, 'DPoP error="invalid_token", error_description="Unknown \\"token\\"", algs="ES256"')
    r = await run(console, tenant)
    ran = steps(r.text)
    assert ran["api"] == "no" and ran["revoke"] == "skipped"
    assert codes(r.text) == ["invalid_token"]
    api = _step(r.text, "api")
    # The first GET operation without path parameters was called; the challenge is shown parsed.
    assert f"<code>GET {origin}/v1/items</code>" in api and f"<code>GET {origin}/v1/items/" not in api
    assert "DPoP (error=invalid_token, algs=ES256)" in api and "Unknown &#34;token&#34;" in api
    assert "PAP-6-03" in api and "sdk.md#refusals" in api
    run_id = re.search(r'href="/simulator-runs/(sim_\w+)" data-run-link', r.text)
    assert run_id is not None
    kept = await console.get(f"/simulator-runs/{run_id.group(1)}")
    assert 'data-step="api" data-ok="no"' in kept.text and 'data-code="invalid_token"' in kept.text


async def test_a_refusal_asking_for_a_sign_in_is_informational(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    origin = await _company(console, issuer, tenant, dns, web, [{"type": "openapi", "url": "{origin}/openapi.json",
                                                                  "description": "Items"}])
    _refusing(web, origin, 401, 'DPoP error="sign_in_required", scope="orders:read", algs="ES256"')
    r = await run(console, tenant)
    ran = steps(r.text)
    assert ran["api"] == "skipped" and statuses(r.text)["signin"] == "informational"
    assert codes(r.text) == ["sign_in_not_offered"]  # the run went on to the sign-in
    api = _step(r.text, "api")
    assert "informational" in api and "401 sign_in_required" in api and "scope=orders:read" in api


async def test_an_api_that_cannot_be_reached_is_a_finding(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    origin = await _company(console, issuer, tenant, dns, web, [{"type": "openapi", "url": "{origin}/openapi.json",
                                                                  "description": "Items"}])
    r = await run(console, tenant)  # nothing serves the OpenAPI document: 404
    assert steps(r.text)["api"] == "no" and codes(r.text) == ["not_found"]
    assert f"{origin}/openapi.json" in _step(r.text, "api")


async def test_an_openapi_document_too_large_to_read_is_informational(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    origin = await _company(console, issuer, tenant, dns, web, [{"type": "openapi", "url": "{origin}/openapi.json",
                                                                  "description": "Items"}])
    web.serve(f"{origin}/openapi.json", body=b'{"openapi": "3.1.0", "x": "' + b"a" * 200_000 + b'"}')
    r = await run(console, tenant)
    ran = steps(r.text)
    assert ran["api"] == "skipped" and statuses(r.text)["signin"] == "informational"
    assert codes(r.text) == ["sign_in_not_offered"]  # the run went on to the sign-in
    assert "larger than the simulator reads" in _step(r.text, "api")
