"""Device Sign-In on the wire (PAP §4.6, RFC 8628): the authorization response, every
polling answer, and the signed-in Session it ends with (PAP §4.4)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from frontdoor_core.errors import RateLimited
from frontdoor_sessions import USER_CODE_ALPHABET, DeviceStore
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb

from .conftest import Company, assert_refusal, new_agent


async def test_device_authorization_response(company: Company, agent: TestAgent) -> None:
    r = await company.device(agent, "poppy:read")
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert set(body) == {"device_code", "user_code", "verification_uri", "verification_uri_complete",
                         "expires_in", "interval"}
    assert len(body["device_code"]) >= 43
    assert re.fullmatch(f"[{USER_CODE_ALPHABET}]{{4}}-[{USER_CODE_ALPHABET}]{{4}}", body["user_code"])
    issuer = company.tenant.issuer
    assert body["verification_uri"] == f"{issuer}/device"
    assert body["verification_uri_complete"] == f"{issuer}/device?user_code={body['user_code']}"
    assert body["expires_in"] == 600 and body["interval"] == 5


@pytest.mark.parametrize(("form", "status", "error"), [
    ({"scope": "poppy:admin"}, 400, "invalid_scope"),
    ({"scope": "poppy:read  poppy:write"}, 400, "invalid_scope"),
    ({"scope": None}, 400, "invalid_request"),
    ({"client_assertion": "not-a-jwt"}, 401, "invalid_client"),
    ({"client_assertion_type": None}, 401, "invalid_client"),
])
async def test_device_authorization_refusals(company: Company, agent: TestAgent, form: dict[str, Any], status: int,
                                             error: str) -> None:
    data = {**company.client_form(agent), "scope": "poppy:read", **form}
    r = await company.issuer.post(f"/{company.tenant.slug}/oauth/device",
                                  data={k: v for k, v in data.items() if v is not None})
    assert_refusal(r, status, error)


async def test_device_sign_in_must_be_enabled(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                              tenant: TenantHandle, agent: TestAgent, clock: Any,
                                              store: DeviceStore) -> None:
    company = Company(issuer=issuer, tenant=tenant, clock=clock, store=store, credential="")
    assert_refusal(await company.device(agent, "poppy:read"), 400, "unauthorized_client")


async def test_polling_pending_slow_down_then_signed_in(company: Company, agent: TestAgent) -> None:
    """RFC 8628 §3.5; PAP-4.6-01: nothing is approved until the user approves."""
    session = await company.session(agent, "alice")
    started = (await company.device(agent, "poppy:read poppy:write")).json()
    found = await company.store.find_by_user_code(company.tenant.id, started["user_code"].lower().replace("-", " "))
    assert found is not None and found.status == "pending" and found.scope == ("poppy:read", "poppy:write")

    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]),
                   400, "authorization_pending")
    # Faster than the interval: slow_down, and the interval grows by 5 s for good.
    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]), 400, "slow_down")
    company.clock.advance(seconds=6)  # 6 < 10: slow_down again, now 15 s
    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]), 400, "slow_down")
    company.clock.advance(seconds=10)  # the interval is remembered: 10 < 15
    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]), 400, "slow_down")
    company.clock.advance(seconds=21)
    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]),
                   400, "authorization_pending")

    assert await company.store.approve(company.tenant.id, found.handle, "acct-42", ["poppy:read"])
    company.clock.advance(seconds=21)
    r = await company.poll(agent, started["device_code"], session["session_id"])
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["token_type"] == "DPoP" and body["signed_in"] is True
    assert body["session_id"] == session["session_id"]
    assert body["scope"] == "poppy:read"  # partial consent shows (PAP-4.4-02)
    assert body["refresh_token"].startswith("fdat_")
    assert body["expires_in"] > 0

    state = await company.introspect(body["access_token"])
    assert state["active"] is True and state["signed_in"] is True
    assert state["account"] == "acct-42" and state["scope"] == "poppy:read"
    # The Session Token from before the sign-in reads the Session's state now.
    before = await company.introspect(session["access_token"])
    assert before["signed_in"] is True and before["account"] == "acct-42"

    # Used once: another poll is invalid_grant.
    company.clock.advance(seconds=30)
    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]), 400, "invalid_grant")


async def test_denied_and_expired(company: Company, agent: TestAgent) -> None:
    session = await company.session(agent, "bob")
    denied = (await company.device(agent, "poppy:read")).json()
    found = await company.store.find_by_user_code(company.tenant.id, denied["user_code"])
    assert found is not None
    assert await company.store.deny(company.tenant.id, found.handle)
    assert not await company.store.approve(company.tenant.id, found.handle, "acct", "poppy:read")
    assert_refusal(await company.poll(agent, denied["device_code"], session["session_id"]), 400, "access_denied")
    assert await company.store.find_by_user_code(company.tenant.id, denied["user_code"]) is None

    expiring = (await company.device(agent, "poppy:read")).json()
    company.clock.advance(seconds=601)
    assert await company.store.find_by_user_code(company.tenant.id, expiring["user_code"]) is None
    assert_refusal(await company.poll(agent, expiring["device_code"], session["session_id"]), 400, "expired_token")


async def test_device_code_is_bound_to_client_session_and_user(company: Company, agent: TestAgent,
                                                               web: MockWeb) -> None:
    other = new_agent(web)
    mine = await company.session(agent, "carol")
    started = (await company.device(agent, "poppy:read")).json()
    theirs = await company.session(other, "carol")
    # Another client: its own Session, our device code.
    assert_refusal(await company.poll(other, started["device_code"], theirs["session_id"]), 400, "invalid_grant")
    # Our client, a Session of another agent.
    assert_refusal(await company.poll(agent, started["device_code"], theirs["session_id"]), 400, "invalid_session")
    # Missing parameters; an unknown code. (Without session_id, a tenant serving 1.0 takes the
    # poll as a 1.0 one: tests/integration/issuer/test_pap10_grants.py.)
    r = await company.post_token(agent, {"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                                         "session_id": mine["session_id"]})
    assert_refusal(r, 400, "invalid_request")
    assert_refusal(await company.poll(agent, "x" * 43, mine["session_id"]), 400, "invalid_grant")
    # The first poll binds the code to the user; a Session of another user of the agent is refused.
    assert_refusal(await company.poll(agent, started["device_code"], mine["session_id"]), 400, "authorization_pending")
    stranger = await company.session(agent, "mallory")
    company.clock.advance(seconds=6)
    assert_refusal(await company.poll(agent, started["device_code"], stranger["session_id"]), 400, "invalid_grant")
    # Without DPoP the poll is refused like any token request.
    r = await company.post_token(agent, {"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                                         "device_code": started["device_code"], "session_id": mine["session_id"]},
                                 dpop=False)
    assert_refusal(r, 400, "invalid_dpop_proof")


async def test_more_than_requested_is_never_granted(company: Company, agent: TestAgent, db: Any) -> None:
    """PAP-4.4-02: an approval wider than the request fails at redemption; nothing is signed in."""
    session = await company.session(agent, "dave")
    started = (await company.device(agent, "poppy:read")).json()
    found = await company.store.find_by_user_code(company.tenant.id, started["user_code"])
    assert found is not None
    await company.store.approve(company.tenant.id, found.handle, "acct-d", "poppy:read poppy:write")
    assert_refusal(await company.poll(agent, started["device_code"], session["session_id"]), 400, "invalid_scope")
    row = await db.fetchrow("SELECT signed_in_at, bound_account FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                            company.tenant.id, session["session_id"])
    assert row["signed_in_at"] is None and row["bound_account"] is None
    assert await db.fetchval("SELECT count(*) FROM sign_ins WHERE tenant_id = $1", company.tenant.id) == 0


async def test_sign_in_is_persisted_hashed_with_an_event(company: Company, agent: TestAgent, db: Any) -> None:
    body = await company.sign_in(agent, "erin", "acct-e", scope="poppy:read")
    token = body["refresh_token"]
    rows = await db.fetch("SELECT * FROM account_tokens WHERE tenant_id = $1", company.tenant.id)
    assert len(rows) == 1
    assert token.encode() not in bytes(rows[0]["token_hash"]) and rows[0]["account_id"] == "acct-e"
    sign_in = await db.fetchrow("SELECT * FROM sign_ins WHERE tenant_id = $1", company.tenant.id)
    assert sign_in["type"] == "device" and sign_in["scope"] == "poppy:read" and sign_in["user_id"] == "erin"
    assert sign_in["id"].startswith("sgn_")
    session = await db.fetchrow("SELECT sign_in_id, bound_account FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                                company.tenant.id, body["session_id"])
    assert session["sign_in_id"] == sign_in["id"] and session["bound_account"] == "acct-e"
    events = await db.fetch("SELECT type, payload FROM session_events WHERE tenant_id = $1", company.tenant.id)
    assert [e["type"] for e in events] == ["session.signed_in"]
    assert events[0]["payload"]["account"] == "acct-e" and token not in str(events[0]["payload"])
    # An Account Token is never active at introspection (PAP-4.8-01).
    assert await company.introspect(token) == {"active": False}


async def test_user_code_guessing_is_limited_per_tenant(company: Company, agent: TestAgent,
                                                        store: DeviceStore) -> None:
    limited = DeviceStore(store._redis, clock=company.clock, misses_per_tenant_per_minute=3,
                          misses_per_requester_per_minute=2)
    started = (await company.device(agent, "poppy:read")).json()
    at = company.clock()  # every guess at this instant: all count in its minute, however long the test takes
    tenant_id, code = company.tenant.id, started["user_code"]
    for _ in range(2):
        assert await limited.find_by_user_code(tenant_id, "BBBB-BBBB", now=at, requester="10.0.0.1") is None
    with pytest.raises(RateLimited):  # this requester is out of guesses
        await limited.find_by_user_code(tenant_id, code, now=at, requester="10.0.0.1")
    assert await limited.find_by_user_code(tenant_id, "CCCC-CCCC", now=at, requester="10.0.0.2") is None
    with pytest.raises(RateLimited):  # the tenant as a whole is too
        await limited.find_by_user_code(tenant_id, code, now=at, requester="10.0.0.3")
    found = await limited.find_by_user_code(tenant_id, code, now=at + timedelta(seconds=61), requester="10.0.0.1")
    assert found is not None and found.client_id == agent.client_id
