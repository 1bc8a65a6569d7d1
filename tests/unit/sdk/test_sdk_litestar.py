"""The Litestar integration: plugin, per-route guard, ``caller`` dependency."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from frontdoor_sdk import Caller, FrontdoorVerifier, protected_resource_metadata
from frontdoor_sdk.litestar import FrontdoorPlugin, require_caller
from litestar import Litestar, get
from litestar.di import NamedDependency
from litestar.testing import AsyncTestClient

from .kit import API_URL, CREDENTIAL, ISSUER, MCP_URL, PUBLIC, Agent, Clock, FakeFrontdoor


@get("/api/orders", guards=[require_caller(scopes=["orders:read"])])
async def orders(caller: NamedDependency[Caller]) -> dict[str, Any]:
    return {"account": caller.account, "scopes": sorted(caller.scopes)}


@get("/api/products", guards=[require_caller()])
async def products(caller: NamedDependency[Caller]) -> dict[str, Any]:
    return {"signed_in": caller.signed_in}


@get("/unguarded")
async def unguarded(caller: NamedDependency[Caller]) -> dict[str, Any]:
    return {}


@get("/.well-known/oauth-protected-resource/mcp")
async def mcp_metadata() -> dict[str, Any]:
    return protected_resource_metadata(MCP_URL, ISSUER, scopes=["orders:read"])


@pytest.fixture
def frontdoor() -> FakeFrontdoor:
    return FakeFrontdoor()


@pytest.fixture
async def client(frontdoor: FakeFrontdoor) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=Clock())
        app = Litestar(
            route_handlers=[orders, products, unguarded, mcp_metadata],
            plugins=[FrontdoorPlugin(verifier, public_url=PUBLIC)],
        )
        async with AsyncTestClient(app, base_url="http://internal.local:8000") as test_client:
            yield test_client


async def test_a_guarded_route_gets_its_caller(client: AsyncTestClient[Litestar], frontdoor: FakeFrontdoor) -> None:
    """require_caller(scopes=...) verifies; the handler receives the Caller."""
    agent = Agent()
    token = frontdoor.mint(agent, signed_in=True, account="acct_9", scope="orders:read")
    response = await client.get("/api/orders", headers=agent.headers("GET", API_URL, token))
    assert response.status_code == 200, response.text
    assert response.json() == {"account": "acct_9", "scopes": ["orders:read"]}


async def test_refusals_keep_the_protocol_shape(client: AsyncTestClient[Litestar], frontdoor: FakeFrontdoor) -> None:
    """The plugin answers with the refusal's status, challenge and {"error", ...} body."""
    agent = Agent()
    token = frontdoor.mint(agent)
    refused = await client.get("/api/orders", headers=agent.headers("GET", API_URL, token))
    assert refused.status_code == 403
    assert refused.json()["error"] == "sign_in_required"
    assert refused.headers["www-authenticate"].startswith('DPoP error="sign_in_required"')
    assert refused.headers["content-type"].startswith("application/json")
    assert refused.headers["cache-control"] == "no-store"
    signed_out_ok = await client.get(
        "/api/products", headers=agent.headers("GET", "https://shop.example/api/products", token)
    )
    assert signed_out_ok.status_code == 200 and signed_out_ok.json() == {"signed_in": False}
    missing = await client.get("/api/products")
    assert missing.status_code == 401 and missing.json()["error"] == "invalid_token"


async def test_the_caller_dependency_needs_the_guard(client: AsyncTestClient[Litestar]) -> None:
    """A route asking for caller without require_caller is a configuration error, not an open door."""
    response = await client.get("/unguarded")
    assert response.status_code == 500


async def test_protected_resource_metadata_is_served(client: AsyncTestClient[Litestar]) -> None:
    """PAP-6-06, PAP-4.3-26: the issuer in authorization_servers, ES256 listed."""
    document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert document["resource"] == MCP_URL and document["authorization_servers"] == [ISSUER]
    assert document["dpop_signing_alg_values_supported"] == ["ES256"]
