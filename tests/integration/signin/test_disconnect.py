"""Disconnect from the company's side (PAP §4.9): the management API and the issuer
endpoint for the company's own account pages; each audited, Sessions signed out."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb

from .conftest import Company, assert_problem, assert_refusal, new_agent


async def test_management_api_disconnects_one_agent_or_all(console: AsyncTestClient[Any], company: Company,
                                                           agent: TestAgent, web: MockWeb, db: Any) -> None:
    other = new_agent(web)
    mine = await company.sign_in(agent, "alice", "acct-1")
    theirs = await company.sign_in(other, "alice-2", "acct-1")
    unrelated = await company.sign_in(agent, "zed", "acct-2")
    auth = company.tenant.auth

    r = await console.post("/api/v1/accounts/acct-1/disconnect", json={"client_id": agent.client_id}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json() == {"account": "acct-1", "client_id": agent.client_id, "sign_ins_revoked": 1,
                        "tokens_revoked": 1, "sessions_signed_out": 1}
    assert (await company.introspect(mine["access_token"]))["signed_in"] is False
    assert (await company.introspect(theirs["access_token"]))["signed_in"] is True
    assert_refusal(await company.refresh(agent, mine["refresh_token"], session_id=mine["session_id"]),
                   400, "invalid_grant")

    r = await console.post("/api/v1/accounts/acct-1/disconnect", headers=auth)  # every agent
    assert r.status_code == 200 and r.json()["sign_ins_revoked"] == 1
    assert (await company.introspect(theirs["access_token"]))["signed_in"] is False
    assert (await company.introspect(unrelated["access_token"]))["signed_in"] is True
    rows = await db.fetch("SELECT actor_type, target_id, details FROM audit_log WHERE tenant_id = $1"
                          " AND action = 'account.disconnected' ORDER BY id", company.tenant.id)
    assert [r["actor_type"] for r in rows] == ["api_key", "api_key"]
    assert rows[0]["target_id"] == "acct-1" and rows[0]["details"]["client_id"] == agent.client_id


async def test_management_api_revokes_every_token_of_an_agent(console: AsyncTestClient[Any], company: Company,
                                                              agent: TestAgent, db: Any) -> None:
    a = await company.sign_in(agent, "u1", "acct-1")
    b = await company.sign_in(agent, "u2", "acct-2")
    r = await console.post("/api/v1/agents/revoke-tokens", json={"client_id": agent.client_id},
                           headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    assert r.json()["sign_ins_revoked"] == 2 and r.json()["sessions_signed_out"] == 2
    for signed in (a, b):
        assert (await company.introspect(signed["access_token"]))["signed_in"] is False
    # The agent itself is not blocked: it can still start signed-out Sessions.
    assert (await company.session(agent, "u1"))["signed_in"] is False
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'agent.tokens_revoked'",
                             company.tenant.id) == 1


async def test_management_api_input(console: AsyncTestClient[Any], company: Company) -> None:
    auth = company.tenant.auth
    r = await console.post("/api/v1/accounts/acct-1/disconnect", json={"client_id": "http://not-https"}, headers=auth)
    assert r.status_code == 422
    r = await console.post("/api/v1/accounts/acct-1/disconnect", json={"nope": 1}, headers=auth)
    assert r.status_code in (400, 422)
    r = await console.post("/api/v1/accounts/acct-1/disconnect", json={})
    assert r.status_code == 401
    r = await console.post("/api/v1/accounts/unknown/disconnect", json={}, headers=auth)
    assert r.status_code == 200 and r.json()["sign_ins_revoked"] == 0


async def test_issuer_endpoint_with_the_resource_credential(company: Company, agent: TestAgent, web: MockWeb,
                                                            db: Any) -> None:
    other = new_agent(web)
    mine = await company.sign_in(agent, "alice", "acct-9")
    theirs = await company.sign_in(other, "alice", "acct-9")
    url = f"/{company.tenant.slug}/accounts/disconnect"
    auth = {"Authorization": f"Bearer {company.credential}"}

    for headers in ({}, {"Authorization": "Bearer fdrs_nope"}, {"Authorization": f"Basic {company.credential}"}):
        r = await company.issuer.post(url, json={"account": "acct-9"}, headers=headers)
        assert_problem(r, 401, "invalid_client")
        assert r.headers["www-authenticate"].startswith("Bearer")
    for body in ({}, {"account": ""}, {"account": 7}, {"account": "acct-9", "extra": 1}, {"account": " x"}):
        assert_problem(await company.issuer.post(url, json=body, headers=auth), 400, "invalid_request")
    assert_problem(await company.issuer.post(url, data={"account": "acct-9"}, headers=auth), 400, "invalid_request")
    assert_problem(await company.issuer.post(f"/no-such-tenant-{company.tenant.slug}/accounts/disconnect",
                                             json={"account": "acct-9"}, headers=auth), 404, "not_found")

    r = await company.issuer.post(url, json={"account": "acct-9", "client_id": agent.client_id}, headers=auth)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    assert r.json()["sessions_signed_out"] == 1
    assert (await company.introspect(mine["access_token"]))["signed_in"] is False
    assert (await company.introspect(theirs["access_token"]))["signed_in"] is True
    r = await company.issuer.post(url, json={"account": "acct-9"}, headers=auth)
    assert r.json()["sign_ins_revoked"] == 1
    assert (await company.introspect(theirs["access_token"]))["signed_in"] is False
    row = await db.fetchrow("SELECT actor_type, actor_id, details FROM audit_log WHERE tenant_id = $1"
                            " AND action = 'account.disconnected' ORDER BY id LIMIT 1", company.tenant.id)
    assert row["actor_type"] == "system" and row["actor_id"].startswith("key_")
    assert row["details"]["via"] == "resource_credential"
