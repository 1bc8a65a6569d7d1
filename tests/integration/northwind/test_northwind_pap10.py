"""Northwind serving PAP 1.0 beside 0.2 on the same routes (ADR 0004), in-process.

One fake Frontdoor answers both profiles: 0.2 introspection (fake_frontdoor) and 1.0
agent-keys/session-state (tests.unit.sdk.pap10_kit), behind one MockTransport. 1.0
requests are signed with the protocol library's mint_delegation/mint_poppy_session.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
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
from tests.unit.sdk.pap10_kit import Agent10, Fake10

POPPY = {
    "protocol_version": "1.0",
    "organization": {"name": "Northwind", "domain": "northwind.example"},
    "auth": {"issuer": ISSUER},
    "apis": [{"type": "openapi", "url": f"{PUBLIC_URL}/openapi.json"}, {"type": "mcp", "url": MCP_URL}],
}
PRODUCTS = f"{PUBLIC_URL}/api/products"
ORDERS = f"{PUBLIC_URL}/api/orders"
METADATA = f"{PUBLIC_URL}/.well-known/oauth-protected-resource"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Both:
    """The 0.2 fake and the 1.0 fake behind one transport."""

    def __init__(self) -> None:
        self.v02 = FakeFrontdoor()
        self.v10 = Fake10(issuer=ISSUER, credential=CREDENTIAL, now=NOW, issuer_key=self.v02.key)

    def client(self) -> httpx.AsyncClient:
        def handle(request: httpx.Request) -> httpx.Response:
            if str(request.url).startswith(f"{ISSUER}/poppy/"):
                return self.v10.handle(request)
            return self.v02._handle(request)  # the 0.2 fake's handler

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


@pytest.fixture
def fd() -> Both:
    return Both()


@asynccontextmanager
async def northwind(fd: Both) -> AsyncIterator[httpx.AsyncClient]:
    async with fd.client() as to_frontdoor:
        config = NorthwindConfig(
            issuer=ISSUER, credential=CREDENTIAL, public_url=PUBLIC_URL, poppy=POPPY,
            http_client=to_frontdoor, clock=lambda: datetime.fromtimestamp(NOW, UTC),
        )
        app = create_app(config)
        async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=PUBLIC_URL) as c:
            yield c


def _h(pairs: list[tuple[str, str]]) -> dict[str, str]:
    return dict(pairs)


async def test_signed_out_public_routes_are_200(fd: Both) -> None:
    """A 1.0 Session without an access token reaches the routes without scopes."""
    agent = Agent10(fd.v10)
    async with northwind(fd) as client:
        products = await client.get("/api/products", headers=_h(agent.headers("GET", PRODUCTS)))
    assert products.status_code == 200, products.text
    assert len(products.json()) == 5
    assert len(fd.v10.state_asks) == 1 and fd.v02.introspections == 0


async def test_signed_in_with_an_access_token_reads_orders(fd: Both) -> None:
    agent = Agent10(fd.v10)
    token = fd.v10.access_token(agent, account="acct_ada", scope="orders:read")
    async with northwind(fd) as client:
        orders = await client.get("/api/orders", headers=_h(agent.headers("GET", ORDERS, access_token=token)))
        signed_out = await client.get("/api/orders", headers=_h(agent.headers("GET", ORDERS)))
    assert orders.status_code == 200, orders.text
    assert [order["order_id"] for order in orders.json()] == ["ord_10391", "ord_10248"]
    assert signed_out.status_code == 401 and signed_out.json()["error"] == "sign_in_required"
    assert signed_out.headers["www-authenticate"] == f'Bearer scope="orders:read", resource_metadata="{METADATA}"'


async def test_a_replay_is_400_invalid_session(fd: Both) -> None:
    agent = Agent10(fd.v10)
    headers = _h(agent.headers("GET", PRODUCTS))
    async with northwind(fd) as client:
        first = await client.get("/api/products", headers=headers)
        again = await client.get("/api/products", headers=headers)
    assert first.status_code == 200
    assert (again.status_code, again.json()["error"]) == (400, "invalid_session")
    assert "www-authenticate" not in again.headers


async def test_an_ended_session_is_400_session_ended(fd: Both) -> None:
    agent = Agent10(fd.v10)
    async with northwind(fd) as client:
        assert (await client.get("/api/products", headers=_h(agent.headers("GET", PRODUCTS)))).status_code == 200
        fd.v10.sessions[(agent.client_id, agent.sid)].ended = True
        ended = await client.get("/api/products", headers=_h(agent.headers("GET", PRODUCTS)))
    assert (ended.status_code, ended.json()["error"]) == (400, "session_ended")
    assert "www-authenticate" not in ended.headers


async def test_a_revoked_grant_is_401_invalid_token(fd: Both) -> None:
    agent = Agent10(fd.v10)
    token = fd.v10.access_token(agent, account="acct_ada")
    fd.v10.revoke(token)
    async with northwind(fd) as client:
        revoked = await client.get("/api/orders", headers=_h(agent.headers("GET", ORDERS, access_token=token)))
        still = await client.get("/api/products", headers=_h(agent.headers("GET", PRODUCTS)))
    assert (revoked.status_code, revoked.json()["error"]) == (401, "invalid_token")
    assert revoked.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert token[-20:] not in revoked.text + revoked.headers["www-authenticate"]
    assert still.status_code == 200  # the Session goes on signed out


async def test_0_2_requests_still_pass_on_the_same_routes(fd: Both) -> None:
    agent = Agent()
    token = fd.v02.session_token(agent, signed_in=True, account="acct_ada", scope="orders:read")
    async with northwind(fd) as client:
        products = await client.get("/api/products", headers=agent.auth("GET", PRODUCTS, token))
        orders = await client.get("/api/orders", headers=agent.auth("GET", ORDERS, token))
        bare = await client.get("/api/orders")
    assert products.status_code == 200 and orders.status_code == 200, orders.text
    assert bare.status_code == 401 and bare.headers["www-authenticate"].startswith("DPoP")
    assert fd.v10.state_asks == []


async def test_the_mcp_server_takes_1_0(fd: Both) -> None:
    agent = Agent10(fd.v10)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "list_orders", "arguments": {}}}
    token = fd.v10.access_token(agent, account="acct_ada", audience=MCP_URL)
    async with northwind(fd) as client:
        init = await client.post("/mcp", headers={**MCP_HEADERS, **_h(agent.headers("POST", MCP_URL))},
                                 content=json.dumps(body))
        out = await client.post("/mcp", headers={**MCP_HEADERS, **_h(agent.headers("POST", MCP_URL))},
                                content=json.dumps(listing))
        signed_in = await client.post(
            "/mcp", headers={**MCP_HEADERS, **_h(agent.headers("POST", MCP_URL, access_token=token)),
                             "MCP-Protocol-Version": init.json()["result"]["protocolVersion"]},
            content=json.dumps(listing))
    assert init.status_code == 200, init.text
    assert init.json()["result"]["serverInfo"]["name"] == "Northwind"
    assert out.status_code == 401 and out.json()["error"] == "sign_in_required"
    assert f'resource_metadata="{PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"' in (
        out.headers["www-authenticate"])
    assert signed_in.status_code == 200, signed_in.text
    result: dict[str, Any] = signed_in.json()["result"]
    assert result.get("isError") is not True, result


async def test_the_protected_resource_document_is_at_the_root(fd: Both) -> None:
    """RFC 9728: resource = https://{domain}, authorization_servers = [issuer] (ADR 0004 §1)."""
    async with northwind(fd) as client:
        root = await client.get("/.well-known/oauth-protected-resource")
        mcp = await client.get("/.well-known/oauth-protected-resource/mcp")
    assert root.status_code == 200
    document = root.json()
    assert (document["resource"], document["authorization_servers"]) == (PUBLIC_URL, [ISSUER])
    assert document["scopes_supported"] == ["orders:read"]
    assert mcp.json()["resource"] == MCP_URL  # the MCP server's own document is unchanged


async def test_login_and_account_pages_still_answer(fd: Both) -> None:
    async with northwind(fd) as client:
        login = await client.get("/login")
        health = await client.get("/healthz")
    assert login.status_code == 400, login.text  # the login page answers only Frontdoor's signed requests
    assert health.status_code == 200
