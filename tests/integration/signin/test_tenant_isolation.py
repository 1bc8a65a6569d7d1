"""Two tenants: what is made under A is unusable, unrevocable and invisible under B."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.support.agent import TestAgent

from .conftest import Company, assert_problem, assert_refusal


async def test_tokens_and_codes_of_a_are_useless_at_b(console: AsyncTestClient[Any], company: Company,
                                                       other_company: Company, agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "alice", "acct-1")
    at_b = await other_company.session(agent, "alice")
    # A's Account Token at B: unknown there, with or without a Session.
    assert_refusal(await other_company.refresh(agent, signed["refresh_token"]), 400, "invalid_grant")
    assert_refusal(await other_company.refresh(agent, signed["refresh_token"], session_id=at_b["session_id"]),
                   400, "invalid_grant")
    # Revoking it at B changes nothing at A.
    assert (await other_company.revoke(agent, signed["refresh_token"])).status_code == 200
    assert (await company.introspect(signed["access_token"]))["signed_in"] is True
    # A's Account Token and Session Token at B's introspection: inactive.
    assert await other_company.introspect(signed["refresh_token"]) == {"active": False}
    assert await other_company.introspect(signed["access_token"]) == {"active": False}
    # A's device code polled at B; A's user code looked up at B.
    started = (await company.device(agent, "poppy:read")).json()
    assert_refusal(await other_company.poll(agent, started["device_code"], at_b["session_id"]), 400, "invalid_grant")
    assert await other_company.store.find_by_user_code(other_company.tenant.id, started["user_code"]) is None
    found = await company.store.find_by_user_code(company.tenant.id, started["user_code"])
    assert found is not None
    assert not await other_company.store.approve(other_company.tenant.id, found.handle, "acct-x", "poppy:read")
    # B's disconnects (management API and resource credential) do not reach A's sign-ins.
    r = await console.post("/api/v1/accounts/acct-1/disconnect", json={}, headers=other_company.tenant.auth)
    assert r.status_code == 200 and r.json()["sign_ins_revoked"] == 0
    r = await console.post("/api/v1/agents/revoke-tokens", json={"client_id": agent.client_id},
                           headers=other_company.tenant.auth)
    assert r.json()["sign_ins_revoked"] == 0
    r = await other_company.issuer.post(f"/{company.tenant.slug}/accounts/disconnect", json={"account": "acct-1"},
                                        headers={"Authorization": f"Bearer {other_company.credential}"})
    assert_problem(r, 401, "invalid_client")
    assert (await company.introspect(signed["access_token"]))["signed_in"] is True
    ok = await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"])
    assert ok.status_code == 200, ok.text
