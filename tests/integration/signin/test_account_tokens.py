"""Account Tokens at the token endpoint (PAP §4.8): refresh, rotation and reuse, narrowing,
widening, other clients, other users, and where an Account Token is never accepted."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

from .conftest import Company, assert_refusal, make_company, new_agent


async def test_refresh_rotates_and_reuse_is_refused_and_audited(company: Company, agent: TestAgent, db: Any) -> None:
    signed = await company.sign_in(agent, "alice", "acct-1")
    first = signed["refresh_token"]
    r = await company.refresh(agent, first, session_id=signed["session_id"])
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["signed_in"] is True and body["session_id"] == signed["session_id"]
    assert body["token_type"] == "DPoP" and body["scope"] == "poppy:read poppy:write"
    second = body["refresh_token"]
    assert second != first and second.startswith("fdat_")
    # Nothing changed for the Session: no second signed_in event for the webhooks.
    assert await db.fetchval("SELECT count(*) FROM session_events WHERE tenant_id = $1 AND type = 'session.signed_in'",
                             company.tenant.id) == 1

    # The replaced token is invalid_grant; the current one keeps working (PAP, peer suite
    # lifecycle.rotated-token); the reuse is audited for the admins.
    assert_refusal(await company.refresh(agent, first, session_id=signed["session_id"]), 400, "invalid_grant")
    third = await company.refresh(agent, second, session_id=signed["session_id"])
    assert third.status_code == 200, third.text
    assert (await company.introspect(third.json()["access_token"]))["signed_in"] is True
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND actor_type = 'system'"
                             " AND action = 'account_token.reuse_detected'", company.tenant.id) == 1


async def test_refresh_without_session_id_signs_in_a_fresh_session(company: Company, agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "bob", "acct-2")
    r = await company.refresh(agent, signed["refresh_token"])
    assert r.status_code == 200, r.text
    fresh = r.json()
    assert fresh["session_id"] != signed["session_id"] and fresh["signed_in"] is True
    state = await company.introspect(fresh["access_token"])
    assert state["sub"] == "bob" and state["account"] == "acct-2" and state["sid"] == fresh["session_id"]


async def test_narrowing_is_allowed_widening_is_invalid_scope(company: Company, agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "carol", "acct-3")
    r = await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"], scope="poppy:read")
    assert r.status_code == 200, r.text
    assert r.json()["scope"] == "poppy:read"
    assert (await company.introspect(r.json()["access_token"]))["scope"] == "poppy:read"
    # The token keeps what was granted: it can refresh the wider scope again.
    again = await company.refresh(agent, r.json()["refresh_token"], session_id=signed["session_id"])
    assert again.json()["scope"] == "poppy:read poppy:write"

    narrow = await company.sign_in(agent, "carol2", "acct-3b", scope="poppy:read")
    wider = await company.refresh(agent, narrow["refresh_token"], session_id=narrow["session_id"],
                                  scope="poppy:read poppy:write")
    assert_refusal(wider, 400, "invalid_scope")
    # A refusal changes nothing: the same token still works.
    ok = await company.refresh(agent, narrow["refresh_token"], session_id=narrow["session_id"])
    assert ok.status_code == 200, ok.text


async def test_another_client_or_user_cannot_use_it(company: Company, agent: TestAgent, web: MockWeb) -> None:
    """PAP-4.8-01..03: only from its client_id; only for Sessions of its client and user."""
    other = new_agent(web)
    signed = await company.sign_in(agent, "dave", "acct-4")
    theirs = await company.session(other, "dave")
    r = await company.refresh(agent, signed["refresh_token"], session_id=theirs["session_id"], client=other)
    assert_refusal(r, 400, "invalid_grant")
    # No client authentication at all is invalid_client.
    r = await company.issuer.post(f"/{company.tenant.slug}/oauth/token",
                                  data={"grant_type": "refresh_token", "refresh_token": signed["refresh_token"]},
                                  headers=company.proof(agent))
    assert_refusal(r, 401, "invalid_client")
    stranger = await company.session(agent, "eve")
    assert_refusal(await company.refresh(agent, signed["refresh_token"], session_id=stranger["session_id"]),
                   400, "invalid_session")
    # The other client's attempt left the token untouched.
    ok = await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"])
    assert ok.status_code == 200, ok.text


async def test_malformed_and_unknown_tokens(company: Company, agent: TestAgent) -> None:
    for token in ("fdat_" + "A" * 43, "garbage"):
        assert_refusal(await company.refresh(agent, token), 400, "invalid_grant")
    r = await company.post_token(agent, {"grant_type": "refresh_token"})
    assert_refusal(r, 400, "invalid_request")
    signed = await company.sign_in(agent, "fay", "acct-6")
    r = await company.post_token(agent, {"grant_type": "refresh_token", "refresh_token": signed["refresh_token"]},
                                 dpop=False)
    assert_refusal(r, 400, "invalid_dpop_proof")


async def test_account_token_is_never_a_session_token(company: Company, agent: TestAgent) -> None:
    """PAP-4.8-01: at introspection (and so at any API using it) it is never active."""
    signed = await company.sign_in(agent, "gus", "acct-7")
    assert await company.introspect(signed["refresh_token"]) == {"active": False}
    r = await company.issuer.post(f"/{company.tenant.slug}/feedback",
                                  json={"kind": "missing", "task": "t", "description": "d"},
                                  headers={"Authorization": f"DPoP {signed['refresh_token']}",
                                           "DPoP": agent.dpop("POST", f"{company.tenant.issuer}/feedback",
                                                              token=signed["refresh_token"], iat=company.now())})
    assert r.status_code == 401 and "invalid_token" in r.headers["www-authenticate"]


async def test_without_rotation_the_token_stays(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                tenant: TenantHandle, clock: ShiftableClock, store: Any,
                                                agent: TestAgent) -> None:
    company = await make_company(console, issuer, tenant, clock, store, rotate_account_tokens=False)
    signed = await company.sign_in(agent, "hal", "acct-8")
    for _ in range(2):
        r = await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"])
        assert r.status_code == 200, r.text
        assert "refresh_token" not in r.json()


async def test_a_blocked_agent_cannot_refresh(console: AsyncTestClient[Any], company: Company,
                                              agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "ivy", "acct-9")
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=company.tenant.auth)
    assert r.status_code == 200
    assert_refusal(await company.refresh(agent, signed["refresh_token"]), 400, "unauthorized_client")
