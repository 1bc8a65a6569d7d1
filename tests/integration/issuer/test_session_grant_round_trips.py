"""The Session grant with fewer round trips keeps its rules (issue #13 §2).

The replay claims and the per-agent count are one Redis script, and the agent policy is
read by the new Session's ``INSERT``; what the wire shows and what is persisted is
unchanged: a replay is refused and not counted against the agent (PAP-4.2-06), a refused
agent gets ``unauthorized_client`` and no Session row, the blocklist wins over the
allowlist, and an unblock applies to the next request.
"""

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


async def start(issuer: AsyncTestClient[Any], t: TenantHandle, agent: TestAgent, form: dict[str, str]) -> Any:
    return await issuer.post(f"/{t.slug}/oauth/token", data=form,
                             headers={"DPoP": agent.dpop("POST", f"{t.issuer}/oauth/token")})


async def sessions_of(db: Any, t: TenantHandle, agent: TestAgent) -> int:
    return int(await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1 AND client_id = $2",
                                 t.id, agent.client_id))


async def test_replays_are_refused_and_not_counted_against_the_agent(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent, db: Any,
) -> None:
    await configure(console, tenant, sessions_per_agent_per_minute=2)
    await room_in_window(60, needed_s=15)  # the first, second and third Sessions fall in one minute of the limit
    form = agent.token_form(tenant.issuer, "u")
    first = await start(issuer, tenant, agent, form)
    assert first.status_code == 200, first.text
    for _ in range(3):  # the same assertions again, each with a fresh proof
        replay = await start(issuer, tenant, agent, form)
        assert replay.status_code == 401 and replay.json()["error"] == "invalid_client"
    # A fresh client assertion around a replayed Session assertion: the second claim refuses.
    reused = {**agent.token_form(tenant.issuer, "u"), "assertion": form["assertion"]}
    replay = await start(issuer, tenant, agent, reused)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert await sessions_of(db, tenant, agent) == 1
    # No replay was counted: the second Session of the minute is still within the budget of 2.
    second = await start(issuer, tenant, agent, agent.token_form(tenant.issuer, "u"))
    assert second.status_code == 200, second.text
    third = await start(issuer, tenant, agent, agent.token_form(tenant.issuer, "u"))
    assert third.status_code == 429 and third.json()["error"] == "rate_limited"
    assert third.headers["RateLimit-Policy"] == '"sessions-per-agent";q=2;w=60'
    assert 1 <= int(third.headers["Retry-After"]) <= 60
    assert await sessions_of(db, tenant, agent) == 2


async def test_a_refused_agent_gets_no_session_row_and_the_blocklist_wins(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    web: MockWeb, db: Any,
) -> None:
    other = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    r = await console.put("/api/v1/agent-policy", json={"mode": "allowlist", "allow": [agent.client_id]},
                          headers=tenant.auth)
    assert r.status_code == 200, r.text
    refused = await start(issuer, tenant, other, other.token_form(tenant.issuer, "u"))
    assert refused.json()["error"] == "unauthorized_client"
    assert await sessions_of(db, tenant, other) == 0
    assert (await start(issuer, tenant, agent, agent.token_form(tenant.issuer, "u"))).status_code == 200
    # Allowlisted and blocked: refused, nothing written.
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    blocked = await start(issuer, tenant, agent, agent.token_form(tenant.issuer, "u"))
    assert blocked.json()["error"] == "unauthorized_client"
    assert await sessions_of(db, tenant, agent) == 1
    # Unblocked: the very next request starts a Session.
    await console.post("/api/v1/agents/unblock", json={"client_id": agent.client_id}, headers=tenant.auth)
    again = await start(issuer, tenant, agent, agent.token_form(tenant.issuer, "u"))
    assert again.status_code == 200, again.text
    assert await sessions_of(db, tenant, agent) == 2
