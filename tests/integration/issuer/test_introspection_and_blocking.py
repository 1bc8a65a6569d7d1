"""Introspection for company resource servers, blocking agents, and failing closed."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def credential(console: AsyncTestClient[Any], t: TenantHandle) -> str:
    r = await console.post("/api/v1/resource-credentials", json={"name": "orders-api"}, headers=t.auth)
    assert r.status_code == 201, r.text
    assert r.json()["introspection_endpoint"] == f"{t.issuer}/oauth/introspect"
    return str(r.json()["secret"])


async def session(issuer: AsyncTestClient[Any], t: TenantHandle, agent: TestAgent, user: str = "u1") -> dict[str, Any]:
    r = await issuer.post(f"/{t.slug}/oauth/token", data=agent.token_form(t.issuer, user),
                          headers={"DPoP": agent.dpop("POST", f"{t.issuer}/oauth/token")})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def introspect(issuer: AsyncTestClient[Any], t: TenantHandle, secret: str, token: str) -> Any:
    return await issuer.post(f"/{t.slug}/oauth/introspect", data={"token": token},
                             headers={"Authorization": f"Bearer {secret}"})


async def test_introspection_answers_session_state(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                   tenant: TenantHandle, agent: TestAgent) -> None:
    secret = await credential(console, tenant)
    s = await session(issuer, tenant, agent, "alice")
    r = await introspect(issuer, tenant, secret, s["access_token"])
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["active"] is True
    assert body["client_id"] == agent.client_id and body["sub"] == "alice" and body["sid"] == s["session_id"]
    assert body["signed_in"] is False and body["account"] is None and body["scope"] is None
    assert body["cnf"]["jkt"] == agent.dpop_key.thumbprint()
    assert body["token_type"] == "DPoP" and body["iss"] == tenant.issuer
    garbage = await introspect(issuer, tenant, secret, "not-a-token")
    assert garbage.json() == {"active": False}


async def test_introspection_requires_this_tenants_credential(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    agent: TestAgent,
) -> None:
    mine = await credential(console, tenant)
    theirs = await credential(console, other_tenant)
    s = await session(issuer, tenant, agent)
    for secret in ("", "fdrs_nope", theirs):
        r = await introspect(issuer, tenant, secret, s["access_token"])
        assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    # A's token introspected at B (with B's own credential) is simply inactive.
    r = await introspect(issuer, other_tenant, theirs, s["access_token"])
    assert r.json() == {"active": False}
    # A revoked credential stops working.
    creds = (await console.get("/api/v1/resource-credentials", headers=tenant.auth)).json()["data"]
    await console.delete(f"/api/v1/resource-credentials/{creds[0]['id']}", headers=tenant.auth)
    assert (await introspect(issuer, tenant, mine, s["access_token"])).status_code == 401


async def test_blocking_an_agent_ends_its_sessions_and_refuses_new_ones(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent, db: Any,
) -> None:
    secret = await credential(console, tenant)
    s = await session(issuer, tenant, agent)
    listed = (await console.get("/api/v1/agents", headers=tenant.auth)).json()["data"]
    assert agent.client_id in {a["client_id"] for a in listed}
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=tenant.auth)
    assert r.status_code == 200 and r.json()["sessions_ended"] == 1
    assert (await introspect(issuer, tenant, secret, s["access_token"])).json() == {"active": False}
    refused = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u2"),
                                headers={"DPoP": agent.dpop("POST", f"{tenant.issuer}/oauth/token")})
    assert refused.status_code in (400, 401) and refused.json()["error"] == "unauthorized_client"
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'agent.blocked'",
                             tenant.id) == 1
    await console.post("/api/v1/agents/unblock", json={"client_id": agent.client_id}, headers=tenant.auth)
    assert (await session(issuer, tenant, agent))["token_type"] == "DPoP"


async def test_allowlist_mode(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                              agent: TestAgent, web: MockWeb) -> None:
    other = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    r = await console.put("/api/v1/agent-policy", json={"mode": "allowlist", "allow": [agent.client_id]},
                          headers=tenant.auth)
    assert r.status_code == 200 and r.json()["allowlist"] == [agent.client_id]
    assert (await session(issuer, tenant, agent))["token_type"] == "DPoP"
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=other.token_form(tenant.issuer, "u"),
                          headers={"DPoP": other.dpop("POST", f"{tenant.issuer}/oauth/token")})
    assert r.json()["error"] == "unauthorized_client"


async def test_mcp_resource_tokens(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                   agent: TestAgent) -> None:
    """PAP §4.3/§6: resource-bound tokens; Bearer where the MCP server has no DPoP."""
    current = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]
    current["apis"] = [
        {"type": "mcp", "url": "https://mcp.shop.example/mcp", "description": "Search", "supports_dpop": True},
        {"type": "mcp", "url": "https://legacy.shop.example/mcp", "description": "Old", "supports_dpop": False},
    ]
    assert (await console.put("/api/v1/issuer", json=current, headers=tenant.auth)).status_code == 200
    secret = await credential(console, tenant)
    # (the issuer has not seen this tenant yet in this test, so no cached settings are stale)
    form = agent.token_form(tenant.issuer, "u", resource="https://legacy.shop.example/mcp")
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=form)  # no proof needed for a Bearer server
    assert r.status_code == 200, r.text
    assert r.json()["token_type"] == "Bearer"
    state = (await introspect(issuer, tenant, secret, r.json()["access_token"])).json()
    assert state["resource"] == "https://legacy.shop.example/mcp" and "cnf" not in state
    dpop = await issuer.post(f"/{tenant.slug}/oauth/token",
                             data=agent.token_form(tenant.issuer, "u", resource="https://mcp.shop.example/mcp"))
    assert dpop.json()["error"] == "invalid_dpop_proof"


async def test_token_endpoint_fails_closed_without_redis(settings: Settings, migrated: str, tenant: TenantHandle,
                                                         agent: TestAgent, web: MockWeb, clock: ShiftableClock) -> None:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_issuer.app import create_app

    broken = msgspec.structs.replace(settings, redis_url="redis://127.0.0.1:1/0")
    app = create_app(broken, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url="https://issuer.frontdoor.test") as c:
        r = await c.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                         headers={"DPoP": agent.dpop("POST", f"{tenant.issuer}/oauth/token")})
        assert r.status_code == 503
        assert r.json()["error"] == "temporarily_unavailable"
        assert int(r.headers["retry-after"]) > 0
        ready = await c.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["redis"] == "unavailable"
