"""``GET {issuer}/accounts/{account}/agents`` marks the dashboard's agent simulator (issue #19
§1: "marked as the simulator in every list"): a company's account page can hide or mark a
test user its admin signed in from the simulator. The mark is the tenant's own record of its
simulator's client_ids; the company sdk reads it."""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_console.simulator import register_client_id
from frontdoor_core.runtime import Runtime
from frontdoor_sdk.accounts import ConnectedAgent
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_agent_funnel_sign_ins import SCOPE, _device_to_consent
from tests.integration.signin.conftest import Company, new_agent
from tests.integration.signin.test_direct_sign_in import setup
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


async def _connect(issuer: AsyncTestClient[Any], company: Company, key: Any, agent: TestAgent, account: str) -> None:
    """A Device Sign-In of ``account`` to ``agent``, allowed and redeemed."""
    session = await company.session(agent, "user-1")
    started, token = await _device_to_consent(issuer, company, key, agent, account)
    r = await issuer.post(f"/{company.tenant.slug}/consent", data={"_csrf_token": token, "decision": "allow",
                                                                   "scope": SCOPE.split(" ")})
    assert r.status_code == 200, r.text
    polled = await company.poll(agent, started["device_code"], session["session_id"])
    assert polled.status_code == 200 and polled.json()["signed_in"] is True, polled.text


async def test_the_connected_agents_of_an_account_mark_the_simulator(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    clock: ShiftableClock, runtime: Runtime, web: MockWeb,
) -> None:
    store = DeviceStore(runtime.redis, clock=clock)
    company, key = await setup(console, issuer, tenant, clock, store)
    other, other_key = await setup(console, issuer, other_tenant, clock, store)
    simulator, agent = new_agent(web), new_agent(web)
    async with runtime.pool.acquire() as conn:
        await register_client_id(conn, tenant.id, simulator.client_id, now=clock())
    await _connect(issuer, company, key, simulator, "acct_ada")
    await _connect(issuer, company, key, agent, "acct_ada")
    await _connect(issuer, other, other_key, simulator, "acct_ada")  # the same client_id, another tenant

    r = await issuer.get(f"/{tenant.slug}/accounts/acct_ada/agents",
                         headers={"Authorization": f"Bearer {company.credential}"})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store", r.text
    listed = r.json()["agents"]
    assert {a["client_id"]: a["simulator"] for a in listed} == {simulator.client_id: True, agent.client_id: False}
    read = {a.client_id: a.simulator for a in (msgspec.convert(a, ConnectedAgent, strict=False) for a in listed)}
    assert read == {simulator.client_id: True, agent.client_id: False}  # what the company sdk gives

    theirs = (await issuer.get(f"/{other_tenant.slug}/accounts/acct_ada/agents",
                               headers={"Authorization": f"Bearer {other.credential}"})).json()["agents"]
    assert [(a["client_id"], a["simulator"]) for a in theirs] == [(simulator.client_id, False)]
