"""The company sdk against the real issuer: its JWKS and its introspection endpoint.

The verifier's HTTP client is the issuer's in-process test client (as the conformance
harness will route it), over the worker's real PostgreSQL and Redis.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

API_URL = "https://shop.example/api/orders"
MCP_URL = "https://mcp.shop.example/mcp"


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def _credential(console: AsyncTestClient[Any], tenant: TenantHandle) -> str:
    r = await console.post("/api/v1/resource-credentials", json={"name": "sdk"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    return str(r.json()["secret"])


async def _session(issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent, **extra: str) -> str:
    headers = {} if "resource" in extra else {"DPoP": agent.dpop("POST", f"{tenant.issuer}/oauth/token")}
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u1", **extra),
                          headers=headers)
    assert r.status_code == 200, r.text
    return str(r.json()["access_token"])


def _headers(agent: TestAgent, method: str, url: str, token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"DPoP {token}"), ("DPoP", agent.dpop(method, url, token=token))]


async def test_a_real_session_is_verified_then_ends(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock,
) -> None:
    """A new Session is a signed-out Caller; scopes need sign-in; blocking the agent ends it at once."""
    secret = await _credential(console, tenant)
    token = await _session(issuer, tenant, agent)
    verifier = FrontdoorVerifier(tenant.issuer, secret, http=issuer, clock=clock)
    caller = await verifier.verify("GET", API_URL, _headers(agent, "GET", API_URL, token))
    assert isinstance(caller, Caller), caller
    assert (caller.client_id, caller.user_id, caller.signed_in, caller.scopes) == (
        agent.client_id, "u1", False, frozenset())
    needs = await verifier.verify("GET", API_URL, _headers(agent, "GET", API_URL, token),
                                  required_scopes=["orders:read"])
    assert isinstance(needs, Refusal) and (needs.status, needs.error) == (403, "sign_in_required")
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=tenant.auth)
    assert r.status_code == 200
    ended = await verifier.verify("GET", API_URL, _headers(agent, "GET", API_URL, token))
    assert isinstance(ended, Refusal) and (ended.status, ended.error) == (401, "invalid_token")
    await console.post("/api/v1/agents/unblock", json={"client_id": agent.client_id}, headers=tenant.auth)


async def test_a_wrong_credential_never_allows(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock,
) -> None:
    """The real endpoint's 401 for a bad credential: the sdk answers 500, not the resource."""
    token = await _session(issuer, tenant, agent)
    verifier = FrontdoorVerifier(tenant.issuer, "fdrs_AAAAAAAA_" + "b" * 43, http=issuer, clock=clock)
    outcome = await verifier.verify("GET", API_URL, _headers(agent, "GET", API_URL, token))
    assert isinstance(outcome, Refusal) and (outcome.status, outcome.error) == (500, "server_error")


async def test_another_tenants_token_is_refused(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
    other_tenant: TenantHandle, agent: TestAgent, clock: ShiftableClock,
) -> None:
    """Two tenants: A's Session Token is invalid_token at B's resource."""
    theirs = await _credential(console, other_tenant)
    token = await _session(issuer, tenant, agent)
    verifier = FrontdoorVerifier(other_tenant.issuer, theirs, http=issuer, clock=clock)
    outcome = await verifier.verify("GET", API_URL, _headers(agent, "GET", API_URL, token))
    assert isinstance(outcome, Refusal) and (outcome.status, outcome.error) == (401, "invalid_token")


async def test_a_bearer_mcp_token_at_its_server(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock,
) -> None:
    """PAP-4.3-10: a Bearer token for a server without DPoP works there and nowhere else."""
    current = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]
    current["apis"] = [{"type": "mcp", "url": MCP_URL, "description": "Search", "supports_dpop": False}]
    assert (await console.put("/api/v1/issuer", json=current, headers=tenant.auth)).status_code == 200
    secret = await _credential(console, tenant)
    token = await _session(issuer, tenant, agent, resource=MCP_URL)
    verifier = FrontdoorVerifier(tenant.issuer, secret, http=issuer, clock=clock)
    bearer = [("Authorization", f"Bearer {token}")]
    caller = await verifier.verify("POST", MCP_URL, bearer, resource_url=MCP_URL, mcp_dpop=False)
    assert isinstance(caller, Caller) and caller.token_type == "Bearer"
    elsewhere = await verifier.verify("GET", API_URL, bearer)
    assert isinstance(elsewhere, Refusal) and elsewhere.error == "invalid_token"
