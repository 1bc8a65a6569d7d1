"""``GET /api/v1/agents`` marks the dashboard's agent simulator (issue #19 §1: "marked as the
simulator in every list"): ``simulator`` is true for a client_id the tenant's simulator acts
under (recorded in ``simulator_client_ids`` before its first request), false for every other
agent, and the mark is the tenant's own: another tenant the same client_id called is not told."""

from __future__ import annotations

from typing import Any

from frontdoor_console.simulator import register_client_id
from frontdoor_core.runtime import Runtime
from frontdoor_identity import get_agent
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.issuer.test_browser_verify import start_session
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


async def test_the_agents_list_flags_the_simulator_for_its_tenant_only(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    web: MockWeb, runtime: Runtime, clock: ShiftableClock,
) -> None:
    simulator = TestAgent(host=f"{unique('sim-')}.example").publish(web)
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    async with runtime.pool.acquire() as conn:
        await register_client_id(conn, tenant.id, simulator.client_id, now=clock())
    for t in (tenant, other_tenant):
        await start_session(issuer, t, simulator, "user-1")  # a real token request: the agent is seen
    await start_session(issuer, tenant, agent, "user-2")

    r = await console.get("/api/v1/agents", headers=tenant.auth)
    assert r.status_code == 200, r.text
    flags = {a["client_id"]: a["simulator"] for a in r.json()["data"]}
    assert flags == {simulator.client_id: True, agent.client_id: False}
    # The filter and the pages keep it.
    unblocked = (await console.get("/api/v1/agents", params={"blocked": "false", "limit": 1},
                                   headers=tenant.auth)).json()
    assert len(unblocked["data"]) == 1 and unblocked["next_cursor"] is not None
    assert unblocked["data"][0]["simulator"] is flags[unblocked["data"][0]["client_id"]]

    theirs = (await console.get("/api/v1/agents", headers=other_tenant.auth)).json()["data"]
    assert [(a["client_id"], a["simulator"]) for a in theirs] == [(simulator.client_id, False)]

    async with runtime.pool.acquire() as conn:
        one = await get_agent(conn, tenant.id, simulator.client_id)
        elsewhere = await get_agent(conn, other_tenant.id, simulator.client_id)
    assert one is not None and one.simulator is True
    assert elsewhere is not None and elsewhere.simulator is False


async def test_the_openapi_document_describes_the_flag(console: AsyncTestClient[Any]) -> None:
    doc = (await console.get("/api/v1/openapi.json")).json()
    schema = next(s for name, s in doc["components"]["schemas"].items() if name.endswith("Agent")
                  and "blocked_at" in s.get("properties", {}))
    assert schema["properties"]["simulator"]["type"] == "boolean"
