"""The lean introspection path (issue #13 §1, ADR 0005 §6): the ASGI route in front of
Litestar and the Session state cached in Redis, versioned by the tenant's event head.

Every test introspects first (so the state is cached), changes the state, and introspects
again at once: the answer must be the new state (PAP-4.9-01: the next request is refused).
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_sessions import DeviceStore, IntrospectionCache, publish_head
from frontdoor_sessions.introspection_cache import CachedState, head_key
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

from .conftest import Company, make_company


@pytest.fixture
async def company(console: AsyncTestClient[Any], lean: AsyncTestClient[Any], tenant: TenantHandle,
                  clock: ShiftableClock, store: DeviceStore) -> Company:
    return await make_company(console, lean, tenant, clock, store)


async def test_blocking_an_agent_is_seen_by_the_next_introspection(console: AsyncTestClient[Any], company: Company,
                                                                    agent: TestAgent, runtime: Runtime) -> None:
    s = await company.session(agent, "alice")
    assert (await company.introspect(s["access_token"]))["active"] is True
    assert await runtime.redis.exists(f"fd:{{{company.tenant.id}}}:introspection:ses:{s['session_id']}") == 1
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    assert await company.introspect(s["access_token"]) == {"active": False}


async def test_a_revocation_and_a_disconnect_are_seen_by_the_next_introspection(
    console: AsyncTestClient[Any], company: Company, web: MockWeb,
) -> None:
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    signed = await company.sign_in(agent, "bob", "acct-bob")
    token = signed["access_token"]
    state = await company.introspect(token)
    assert state["signed_in"] is True and state["account"] == "acct-bob"
    assert (await company.revoke(agent, signed["refresh_token"])).status_code == 200  # RFC 7009, by the agent
    after = await company.introspect(token)
    assert after["active"] is True and after["signed_in"] is False and after["account"] is None

    again = await company.sign_in(agent, "bob", "acct-bob", session_id=signed["session_id"])
    assert (await company.introspect(again["access_token"]))["signed_in"] is True  # a sign-in is seen at once too
    r = await console.post("/api/v1/accounts/acct-bob/disconnect", headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    assert (await company.introspect(again["access_token"]))["signed_in"] is False


async def test_a_narrowed_refresh_is_seen_by_the_next_introspection(company: Company, agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "carol", "acct-carol")
    assert (await company.introspect(signed["access_token"]))["scope"] == "poppy:read poppy:write"
    r = await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"], scope="poppy:read")
    assert r.status_code == 200, r.text
    # The Session Token issued before the refresh: same Session, so the same (narrowed) state.
    assert (await company.introspect(signed["access_token"]))["scope"] == "poppy:read"


async def test_an_entry_older_than_the_head_never_answers(runtime: Runtime) -> None:
    cache = IntrospectionCache(runtime.redis)
    tenant = unique("ten_")
    state = CachedState(seq=5, live=True, client_id="https://a.example", user_id="u", allowed=True,
                        account=None, scope=None)
    await cache.put(tenant, "ses_1", state)
    assert await cache.get(tenant, "ses_1") == state
    await publish_head(runtime.redis, tenant, 6)  # a revoke committed at position 6
    assert await cache.get(tenant, "ses_1") is None
    await cache.put(tenant, "ses_1", state)  # a read from before the revoke, arriving late
    assert await cache.get(tenant, "ses_1") is None
    await publish_head(runtime.redis, tenant, 4)  # the head never goes back
    assert int(await runtime.redis.get(head_key(tenant))) == 6
    fresh = CachedState(seq=6, live=False, client_id="https://a.example", user_id="u", allowed=True,
                        account=None, scope=None)
    await cache.put(tenant, "ses_1", fresh)
    assert await cache.get(tenant, "ses_1") == fresh
    await runtime.redis.delete(head_key(tenant))  # evicted or expired: nothing answers from the cache
    assert await cache.get(tenant, "ses_1") is None


async def test_one_tenants_revoke_leaves_the_others_entries(runtime: Runtime) -> None:
    cache = IntrospectionCache(runtime.redis)
    a, b = unique("ten_"), unique("ten_")
    state = CachedState(seq=1, live=True, client_id="https://a.example", user_id="u", allowed=True,
                        account=None, scope=None)
    await cache.put(a, "ses_1", state)
    await cache.put(b, "ses_1", state)
    await publish_head(runtime.redis, a, 2)
    assert await cache.get(a, "ses_1") is None and await cache.get(b, "ses_1") == state


async def test_the_lean_route_keeps_the_wire(company: Company, other_company: Company, agent: TestAgent,
                                             lean: AsyncTestClient[Any]) -> None:
    url = f"/{company.tenant.slug}/oauth/introspect"
    s = await company.session(agent, "dave")
    ok = await lean.post(url, data={"token": s["access_token"]}, headers={"Authorization": f"Bearer {company.credential}",
                                                                          "X-Request-Id": "req_lean_route_1"})
    assert ok.status_code == 200 and ok.headers["content-type"] == "application/json"
    assert ok.headers["cache-control"] == "no-store" and ok.headers["pragma"] == "no-cache"
    assert ok.headers["x-request-id"] == "req_lean_route_1" and ok.headers["x-content-type-options"] == "nosniff"
    assert ok.json()["active"] is True and ok.json()["sid"] == s["session_id"]

    refused = await lean.post(url, data={"token": s["access_token"]},
                              headers={"Authorization": f"Bearer {other_company.credential}"})  # another tenant's
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert (await lean.post(url, data={"token": s["access_token"]})).status_code == 401
    missing = await lean.post(url, data={}, headers={"Authorization": f"Bearer {company.credential}"})
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
    as_json = await lean.post(url, json={"token": s["access_token"]},
                              headers={"Authorization": f"Bearer {company.credential}"})
    assert as_json.status_code == 400 and as_json.json()["error"] == "invalid_request"
    repeated = await lean.post(url, content=b"token=a&token=b", headers={
        "Authorization": f"Bearer {company.credential}", "Content-Type": "application/x-www-form-urlencoded"})
    assert repeated.status_code == 400 and repeated.json()["error"] == "invalid_request"
    huge = await lean.post(url, content=b"token=" + b"a" * 70_000, headers={
        "Authorization": f"Bearer {company.credential}", "Content-Type": "application/x-www-form-urlencoded"})
    assert huge.status_code == 413 and huge.json()["error"] == "invalid_request"
    unknown = await lean.post(f"/{unique('no-such-')}/oauth/introspect", data={"token": "x"},
                              headers={"Authorization": f"Bearer {company.credential}"})
    assert unknown.status_code == 404
    # The other tenant's own credential at its own issuer: the token is simply inactive.
    theirs = await lean.post(f"/{other_company.tenant.slug}/oauth/introspect", data={"token": s["access_token"]},
                             headers={"Authorization": f"Bearer {other_company.credential}"})
    assert theirs.status_code == 200 and theirs.json() == {"active": False}
    assert (await lean.get(url)).status_code == 405  # anything but POST is Litestar's
    assert "fdrs_" not in refused.text and "eyJ" not in refused.text


async def test_a_token_verified_before_is_still_refused_once_expired(company: Company, agent: TestAgent,
                                                                     clock: ShiftableClock) -> None:
    """The process remembers verified tokens; expiry is checked on every call all the same."""
    s = await company.session(agent, "erin")
    assert (await company.introspect(s["access_token"]))["active"] is True
    assert (await company.introspect(s["access_token"]))["active"] is True  # the remembered verification
    clock.advance(seconds=s["expires_in"] + 61)  # past exp and the clock skew
    assert await company.introspect(s["access_token"]) == {"active": False}
