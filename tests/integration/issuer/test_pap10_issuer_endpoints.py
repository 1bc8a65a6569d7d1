"""``POST {issuer}/poppy/agent-keys`` and ``POST {issuer}/poppy/session-state`` at the wire
(ADR 0004 §6): the resource-server credential, strict bodies, no-store, first sight,
mismatch, ended, replay, blocked agents, grant families, tenants that do not serve 1.0,
and the two-tenant matrix."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from frontdoor_sessions.sign_in import complete_delegated_sign_in
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import configure, resource_credential
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


def claims(agent: TestAgent, clock: ShiftableClock, **over: Any) -> dict[str, Any]:
    body = {"client_id": agent.client_id, "sid": unique("sid-"), "sub": "alice", "jti": unique("jti-"),
            "iat": int(clock().timestamp())}
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


async def state(issuer: AsyncTestClient[Any], t: TenantHandle, secret: str, body: dict[str, Any]) -> Any:
    r = await issuer.post(f"/{t.slug}/poppy/session-state", json=body, headers={"Authorization": f"Bearer {secret}"})
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    return r.json()


async def test_agent_keys_answers_the_public_keys_with_the_1_0_rules(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    web: MockWeb,
) -> None:
    secret = await resource_credential(console, tenant)
    url = f"/{tenant.slug}/poppy/agent-keys"
    auth = {"Authorization": f"Bearer {secret}"}
    r = await issuer.post(url, json={"client_id": agent.client_id}, headers=auth)
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["client_id"] == agent.client_id and 0 < body["max_age"] <= 300
    assert [k["kid"] for k in body["keys"]] == [agent.kid] and "d" not in body["keys"][0]
    # A document served through a redirect is refused under 1.0; a missing one cannot be loaded.
    moved = TestAgent(host=f"{unique('moved-')}.example")
    web.redirect(moved.client_id, f"https://{moved.host}/other.json")
    web.serve(f"https://{moved.host}/other.json", json=moved.metadata())
    refused = await issuer.post(url, json={"client_id": moved.client_id}, headers=auth)
    assert refused.status_code == 403 and refused.json()["error"] == "invalid_client"
    gone = await issuer.post(url, json={"client_id": f"https://{unique('gone-')}.example/agent.json"}, headers=auth)
    assert gone.status_code == 503 and gone.headers["retry-after"] == "30"
    # Strict bodies, nothing echoed.
    for bad in ({"client_id": agent.client_id, "extra": 1}, {"refresh": True}, [agent.client_id]):
        r = await issuer.post(url, json=bad, headers=auth)
        assert r.status_code == 400 and r.json()["error"] == "invalid_request" and agent.client_id not in r.text
    dup = await issuer.post(url, content=b'{"client_id":"a","client_id":"b"}',
                            headers={**auth, "Content-Type": "application/json"})
    assert dup.status_code == 400
    await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=tenant.auth)
    blocked = await issuer.post(url, json={"client_id": agent.client_id}, headers=auth)
    assert blocked.status_code == 403 and blocked.json()["error"] == "invalid_client"


async def test_session_state_first_sight_mismatch_replay_and_ended(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock, db: Any,
) -> None:
    secret = await resource_credential(console, tenant)
    first = claims(agent, clock, agent_id="car-7")
    s = await state(issuer, tenant, secret, first)
    assert s == {"state": "active", "session": s["session"], "signed_in": False}
    row = await db.fetchrow("SELECT profile, agent_sid, agent_id, user_id, signed_in_at FROM pap_sessions"
                            " WHERE tenant_id = $1 AND id = $2", tenant.id, s["session"])
    assert dict(row) == {"profile": "1.0", "agent_sid": first["sid"], "agent_id": "car-7", "user_id": "alice",
                         "signed_in_at": None}
    replayed = await state(issuer, tenant, secret, first)
    assert replayed == {"state": "replayed", "signed_in": False}
    same = await state(issuer, tenant, secret, {**first, "jti": unique("jti-")})
    assert same["state"] == "active" and same["session"] == s["session"]
    other_sub = await state(issuer, tenant, secret, {**first, "jti": unique("jti-"), "sub": "mallory"})
    assert other_sub["state"] == "mismatch" and other_sub["signed_in"] is False
    no_agent_id = await state(issuer, tenant, secret, {k: v for k, v in first.items() if k != "agent_id"}
                              | {"jti": unique("jti-")})
    assert no_agent_id["state"] == "mismatch"
    # Revoking the Session in the dashboard's use case ends it: session_ended at the resource.
    csrf = await _dashboard_revoke(console, tenant, s["session"])
    assert csrf
    ended = await state(issuer, tenant, secret, {**first, "jti": unique("jti-")})
    assert ended["state"] == "ended" and ended["session"] == s["session"]
    # Blocking the agent ends its 1.0 Sessions too and refuses it from then on.
    live = await state(issuer, tenant, secret, claims(agent, clock))
    await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=tenant.auth)
    assert await db.fetchval("SELECT end_reason FROM pap_sessions WHERE tenant_id = $1 AND id = $2", tenant.id,
                             live["session"]) == "agent_blocked"
    refused = await state(issuer, tenant, secret, claims(agent, clock))
    assert refused == {"state": "refused", "signed_in": False}


async def _dashboard_revoke(console: AsyncTestClient[Any], tenant: TenantHandle, session_id: str) -> str:
    from tests.integration.console.test_dashboard import sign_in

    csrf = await sign_in(console, tenant.email)
    r = await console.post(f"/sessions/{session_id}/revoke", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303, r.text
    console.cookies.clear()
    return csrf


async def test_session_state_signed_in_only_for_a_live_grant_of_this_client(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock, db: Any,
) -> None:
    await configure(console, tenant, device={"enabled": True, "scopes": ["poppy:read"]})
    secret = await resource_credential(console, tenant)
    done = await complete_delegated_sign_in(db, tenant_id=tenant.id, client_id=agent.client_id, account_id="acct-9",
                                            granted_scope="poppy:read", sign_in_type="device", now=clock())
    body = claims(agent, clock, sgn=done.sign_in_id)
    s = await state(issuer, tenant, secret, body)
    assert s["signed_in"] is True and s["account"] == "acct-9" and s["scope"] == "poppy:read"
    other = TestAgent(host=f"{unique('other-')}.example")
    theirs = await state(issuer, tenant, secret, claims(other, clock, sgn=done.sign_in_id))
    assert theirs["signed_in"] is False and "account" not in theirs
    r = await console.post("/api/v1/accounts/acct-9/disconnect", json={}, headers=tenant.auth)
    assert r.status_code == 200, r.text
    after = await state(issuer, tenant, secret, {**body, "jti": unique("jti-")})
    assert after["state"] == "active" and after["signed_in"] is False  # [S §5]: continues signed out


async def test_credentials_tenants_and_profiles(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    agent: TestAgent, clock: ShiftableClock,
) -> None:
    mine = await resource_credential(console, tenant)
    theirs = await resource_credential(console, other_tenant)
    body = claims(agent, clock)
    for path in ("session-state", "agent-keys"):
        for headers in ({}, {"Authorization": f"Bearer {theirs}"}, {"Authorization": f"Basic {mine}"}):
            r = await issuer.post(f"/{tenant.slug}/poppy/{path}", json=body, headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "invalid_client"
            assert r.headers["cache-control"] == "no-store"
    made = await state(issuer, tenant, mine, body)
    # Under B the same (client, sid) is another Session: A's is invisible there.
    seen_by_b = await state(issuer, other_tenant, theirs, {**body, "jti": unique("jti-"), "sub": "mallory"})
    assert seen_by_b["state"] == "active" and seen_by_b["session"] != made["session"]
    # A tenant that serves only 0.2 has no such endpoints.
    await configure(console, other_tenant, protocol={"served": ["0.2"], "published": "0.2"})
    for _ in range(60):  # the issuer caches a tenant's settings for 5 s
        r = await issuer.post(f"/{other_tenant.slug}/poppy/session-state", json=body,
                              headers={"Authorization": f"Bearer {theirs}"})
        if r.status_code == 404:
            break
        await asyncio.sleep(0.1)
    assert r.status_code == 404 and r.json()["error"] == "not_found"
