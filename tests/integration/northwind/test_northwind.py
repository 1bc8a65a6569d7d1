"""Northwind, the example company, in-process against a fake Frontdoor issuer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from northwind import NorthwindConfig, create_app

from tests.integration.northwind.fake_frontdoor import (
    CREDENTIAL,
    ISSUER,
    MCP_URL,
    NOW,
    PUBLIC_URL,
    Agent,
    FakeFrontdoor,
)

POPPY = {
    "protocol_version": "0.2",
    "organization": {"name": "Northwind", "domain": "northwind.example"},
    "auth": {"issuer": ISSUER, "device": {"scopes": ["orders:read"]}},
    "apis": [
        {"type": "openapi", "url": f"{PUBLIC_URL}/openapi.json", "description": "Products and orders"},
        {"type": "mcp", "url": MCP_URL},
    ],
}
PRODUCTS = f"{PUBLIC_URL}/api/products"
ORDERS = f"{PUBLIC_URL}/api/orders"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
ADA_ORDERS = ["ord_10391", "ord_10248"]


@asynccontextmanager
async def northwind(frontdoor: FakeFrontdoor) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and a client that reaches it at its public URL."""
    async with frontdoor.client() as to_frontdoor:
        config = NorthwindConfig(
            issuer=ISSUER,
            credential=CREDENTIAL,
            public_url=PUBLIC_URL,
            poppy=POPPY,
            http_client=to_frontdoor,
            clock=lambda: datetime.fromtimestamp(NOW, UTC),
        )
        app = create_app(config)
        async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=PUBLIC_URL) as c:
            yield c


class McpClient:
    """Just enough of an MCP client: JSON-RPC over Streamable HTTP, a fresh proof per POST."""

    def __init__(self, http: httpx.AsyncClient, agent: Agent, token: str) -> None:
        self.http, self.agent, self.token = http, agent, token
        self.version: str | None = None
        self.ids = 0

    async def post(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        self.ids += 1
        headers = {**MCP_HEADERS, **self.agent.auth("POST", MCP_URL, self.token)}
        if self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params or {}}
        return await self.http.post("/mcp", headers=headers, content=json.dumps(body))

    async def initialize(self) -> dict[str, Any]:
        response = await self.post("initialize", {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test-agent", "version": "1"},
        })
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        self.version = result["protocolVersion"]
        return result

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.post(method, params)
        assert response.status_code == 200, response.text
        assert "error" not in response.json(), response.text
        result: dict[str, Any] = response.json()["result"]
        return result


@pytest.fixture
def frontdoor() -> FakeFrontdoor:
    return FakeFrontdoor()


@pytest.fixture
def agent() -> Agent:
    return Agent()


def ada(frontdoor: FakeFrontdoor, agent: Agent, *, resource: str | None = None) -> str:
    return frontdoor.session_token(
        agent, resource=resource, signed_in=True, account="acct_ada", scope="orders:read"
    )


# --- the API ---------------------------------------------------------------------------


async def test_products_take_a_signed_out_session(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    token = frontdoor.session_token(agent)
    async with northwind(frontdoor) as client:
        everything = await client.get("/api/products", headers=agent.auth("GET", PRODUCTS, token))
        chai = await client.get("/api/products?q=CHAI", headers=agent.auth("GET", PRODUCTS, token))
    assert everything.status_code == 200, everything.text
    assert len(everything.json()) == 5
    assert chai.json() == [{"sku": "NW-CHAI", "name": "Chai", "price": "18.00", "currency": "EUR"}]
    assert frontdoor.introspections == 2  # the Session's state is asked on every request


async def test_no_token_is_401_with_a_bare_dpop_challenge(frontdoor: FakeFrontdoor) -> None:
    async with northwind(frontdoor) as client:
        response = await client.get("/api/products")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("DPoP")
    assert "error=" not in response.headers["www-authenticate"]


async def test_orders_signed_out_is_403_sign_in_required(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    token = frontdoor.session_token(agent)
    async with northwind(frontdoor) as client:
        response = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, token))
    assert response.status_code == 403
    assert response.json()["error"] == "sign_in_required"
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('DPoP error="sign_in_required"')
    assert 'scope="orders:read"' in challenge


async def test_orders_without_the_scope_is_403_insufficient_scope(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    token = frontdoor.session_token(agent, signed_in=True, account="acct_ada", scope="poppy:read")
    async with northwind(frontdoor) as client:
        response = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, token))
    assert response.status_code == 403
    assert response.json()["error"] == "insufficient_scope"
    assert 'scope="orders:read"' in response.headers["www-authenticate"]


async def test_orders_are_the_signed_in_accounts_only(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    grace = frontdoor.session_token(agent, signed_in=True, account="acct_grace", scope="orders:read")
    async with northwind(frontdoor) as client:
        ada_orders = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, ada(frontdoor, agent)))
        grace_orders = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, grace))
    assert ada_orders.status_code == 200, ada_orders.text
    assert [order["order_id"] for order in ada_orders.json()] == ADA_ORDERS
    assert [order["order_id"] for order in grace_orders.json()] == ["ord_10307"]


async def test_sign_out_applies_to_the_next_request(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    token = ada(frontdoor, agent)
    async with northwind(frontdoor) as client:
        before = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, token))
        for state in frontdoor.sessions.values():
            state.signed_in, state.account, state.scope = False, None, None
        after = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, token))
    assert before.status_code == 200
    assert after.status_code == 403
    assert after.json()["error"] == "sign_in_required"


async def test_proofs_are_checked_against_the_public_url_not_host(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    token = frontdoor.session_token(agent)
    internal = "https://10.0.0.7:8003/api/products"  # what a Host-trusting server would rebuild
    async with northwind(frontdoor) as client:
        response = await client.get(
            "/api/products", headers={"Host": "10.0.0.7:8003", **agent.auth("GET", internal, token)}
        )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_dpop_proof"


async def test_a_token_for_the_mcp_server_is_refused_at_the_api(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    token = ada(frontdoor, agent, resource=MCP_URL)
    async with northwind(frontdoor) as client:
        response = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, token))
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"


# --- the MCP server --------------------------------------------------------------------


async def test_mcp_initialize_list_and_search(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    async with northwind(frontdoor) as client:
        mcp = McpClient(client, agent, frontdoor.session_token(agent, resource=MCP_URL))
        info = await mcp.initialize()
        tools = await mcp.call("tools/list")
        found = await mcp.call("tools/call", {"name": "search_products", "arguments": {"query": "syrup"}})
    assert info["serverInfo"]["name"] == "Northwind"
    assert {tool["name"] for tool in tools["tools"]} == {"search_products", "list_orders"}
    assert found.get("isError") is not True, found
    assert found["structuredContent"]["result"] == [
        {"sku": "NW-SYRUP", "name": "Aniseed Syrup", "price": "10.00", "currency": "EUR"}
    ]


async def test_mcp_list_orders_signed_out_is_403(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    async with northwind(frontdoor) as client:
        mcp = McpClient(client, agent, frontdoor.session_token(agent, resource=MCP_URL))
        await mcp.initialize()
        response = await mcp.post("tools/call", {"name": "list_orders", "arguments": {}})
    assert response.status_code == 403
    assert response.json()["error"] == "sign_in_required"
    challenge = response.headers["www-authenticate"]
    assert 'scope="orders:read"' in challenge
    assert f'resource_metadata="{PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"' in challenge


async def test_mcp_list_orders_signed_in(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    async with northwind(frontdoor) as client:
        mcp = McpClient(client, agent, ada(frontdoor, agent, resource=MCP_URL))
        await mcp.initialize()
        result = await mcp.call("tools/call", {"name": "list_orders", "arguments": {}})
    assert [order["order_id"] for order in result["structuredContent"]["result"]] == ADA_ORDERS


async def test_mcp_takes_only_tokens_bound_to_it(frontdoor: FakeFrontdoor, agent: Agent) -> None:
    async with northwind(frontdoor) as client:
        mcp = McpClient(client, agent, frontdoor.session_token(agent))  # an API token
        response = await mcp.post("initialize", {})
        bare = await client.post("/mcp", headers=MCP_HEADERS, content="{}")
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_token"
    assert bare.status_code == 401
    assert bare.headers["www-authenticate"].startswith("Bearer resource_metadata=")


# --- public documents ------------------------------------------------------------------


async def test_poppy_json_is_published_verbatim(frontdoor: FakeFrontdoor) -> None:
    async with northwind(frontdoor) as client:
        response = await client.get("/.well-known/poppy.json")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == POPPY


async def test_mcp_protected_resource_metadata_names_the_issuer(frontdoor: FakeFrontdoor) -> None:
    async with northwind(frontdoor) as client:
        response = await client.get("/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 200
    metadata = response.json()
    assert metadata["resource"] == MCP_URL
    assert metadata["authorization_servers"] == [ISSUER]
    assert metadata["scopes_supported"] == ["orders:read"]


async def test_openapi_describes_the_api(frontdoor: FakeFrontdoor) -> None:
    async with northwind(frontdoor) as client:
        response = await client.get("/openapi.json")
        health = await client.get("/healthz")
    assert response.status_code == 200
    document = response.json()
    assert {"/api/products", "/api/orders"} <= set(document["paths"])
    assert document["servers"] == [{"url": PUBLIC_URL}]
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}


def test_config_from_the_environment(tmp_path: Path) -> None:
    poppy = tmp_path / "poppy.json"
    poppy.write_text(json.dumps(POPPY))
    env = {"NORTHWIND_ISSUER": ISSUER, "NORTHWIND_CREDENTIAL": CREDENTIAL,
           "NORTHWIND_PUBLIC_URL": PUBLIC_URL, "NORTHWIND_POPPY_JSON": str(poppy)}
    config = NorthwindConfig.from_env(env)
    assert (config.issuer, config.mcp_url, config.poppy) == (ISSUER, MCP_URL, POPPY)
    assert CREDENTIAL not in repr(config)
    with pytest.raises(RuntimeError, match="NORTHWIND_CREDENTIAL"):
        NorthwindConfig.from_env({**env, "NORTHWIND_CREDENTIAL": ""})
    with pytest.raises(ValueError, match="origin"):
        NorthwindConfig(issuer=ISSUER, credential=CREDENTIAL, public_url=f"{PUBLIC_URL}/shop", poppy=POPPY)
