"""Per-agent Session rate limits (429 with Retry-After and RateLimit headers) and DPoP
server nonces (use_dpop_nonce with DPoP-Nonce), configured per tenant."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.fixed_windows import room_in_window
from tests.support.mock_web import MockWeb


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def configure(console: AsyncTestClient[Any], t: TenantHandle, **changes: Any) -> None:
    current = (await console.get("/api/v1/issuer", headers=t.auth)).json()["settings"]
    current.update(changes)
    r = await console.put("/api/v1/issuer", json=current, headers=t.auth)
    assert r.status_code == 200, r.text


async def test_sessions_per_agent_are_rate_limited(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                   tenant: TenantHandle, agent: TestAgent, web: MockWeb) -> None:
    other = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    await configure(console, tenant, sessions_per_agent_per_minute=3, agent_rate_overrides={other.client_id: 5})
    url = f"{tenant.issuer}/oauth/token"
    statuses = []
    await room_in_window(60, needed_s=15)  # the 4 requests fall in one minute of the per-agent limit
    for _ in range(4):
        r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                              headers={"DPoP": agent.dpop("POST", url)})
        statuses.append(r.status_code)
    assert statuses == [200, 200, 200, 429]
    assert r.json()["error"] == "rate_limited"
    assert 1 <= int(r.headers["retry-after"]) <= 60
    assert r.headers["ratelimit-policy"].endswith("q=3;w=60")
    assert "r=0" in r.headers["ratelimit"]
    # the override gives the other agent its own, larger budget
    for _ in range(5):
        ok = await issuer.post(f"/{tenant.slug}/oauth/token", data=other.token_form(tenant.issuer, "u"),
                               headers={"DPoP": other.dpop("POST", url)})
        assert ok.status_code == 200


async def test_unauthenticated_requests_do_not_spend_an_agents_budget(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent
) -> None:
    await configure(console, tenant, sessions_per_agent_per_minute=2)
    url = f"{tenant.issuer}/oauth/token"
    for _ in range(5):  # forged assertions: refused before the per-agent counter
        form = agent.token_form(tenant.issuer, "u")
        form["client_assertion"] = form["client_assertion"][:-4] + "AAAA"
        r = await issuer.post(f"/{tenant.slug}/oauth/token", data=form, headers={"DPoP": agent.dpop("POST", url)})
        assert r.json()["error"] == "invalid_client"
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                          headers={"DPoP": agent.dpop("POST", url)})
    assert r.status_code == 200


async def test_dpop_nonces_when_the_tenant_requires_them(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                         tenant: TenantHandle, agent: TestAgent) -> None:
    """PAP-4.3-21, RFC 9449 §8: use_dpop_nonce with a DPoP-Nonce header, then accepted."""
    await configure(console, tenant, dpop_nonce_required=True)
    url = f"{tenant.issuer}/oauth/token"
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                          headers={"DPoP": agent.dpop("POST", url)})
    assert r.status_code == 400 and r.json()["error"] == "use_dpop_nonce"
    nonce = r.headers["dpop-nonce"]
    wrong = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                              headers={"DPoP": agent.dpop("POST", url, nonce="not-the-nonce")})
    assert wrong.json()["error"] == "use_dpop_nonce"
    ok = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                           headers={"DPoP": agent.dpop("POST", url, nonce=nonce)})
    assert ok.status_code == 200, ok.text
    assert ok.headers["dpop-nonce"]
