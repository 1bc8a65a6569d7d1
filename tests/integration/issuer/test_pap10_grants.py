"""The PAP 1.0 grants at the wire (ADR 0004 §4, [S §5]): a device-code or refresh request
without ``session_id`` to a tenant serving 1.0 answers an RFC 9068 access token (``sgn`` =
the sign-in, DPoP-bound or Bearer, ``aud`` the issuer or a protected resource) and the
refresh token, never ``session_id``/``signed_in``; rotation, reuse detection and narrowing;
revocation ends the family at ``session-state``; the refusals when a profile is not
served; 0.2 unchanged beside it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_protocol.access_token import AccessTokenClaims, verify_access_token
from frontdoor_protocol.errors import ProtocolError
from frontdoor_sessions import DeviceStore
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, assert_refusal, make_company, new_agent
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.fixed_windows import room_in_window
from tests.support.mock_web import MockWeb

DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
ACCESS_MEMBERS = {"access_token", "token_type", "expires_in", "scope", "refresh_token"}


@pytest.fixture
def store(runtime: Runtime, clock: ShiftableClock) -> DeviceStore:
    return DeviceStore(runtime.redis, clock=clock)


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return new_agent(web)


@pytest.fixture
async def company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                  clock: ShiftableClock, store: DeviceStore) -> Company:
    return await make_company(console, issuer, tenant, clock, store)


async def verified(company: Company, token: str, audiences: list[str] | None = None) -> AccessTokenClaims:
    """The access token as a resource verifies it, against the issuer's published JWKS."""
    jwks = (await company.issuer.get(f"/{company.tenant.slug}/jwks.json")).json()
    return verify_access_token(token, issuer=company.tenant.issuer, keys=KeySet.import_key_set(jwks),
                               now=company.now(), audiences=audiences)


async def sign_in_1_0(company: Company, agent: TestAgent, account: str = "acct-10", *, dpop: bool = True,
                      scope: str = "poppy:read poppy:write", extra: dict[str, str] | None = None) -> Any:
    """Device Sign-In the 1.0 way: no Session, the poll carries no session_id."""
    started = (await company.device(agent, scope)).json()
    await company.approve(started["user_code"], account, scope)
    return await company.post_token(agent, {"grant_type": DEVICE_CODE, "device_code": started["device_code"],
                                            **(extra or {})}, dpop=dpop)


async def session_state(company: Company, agent: TestAgent, sgn: str) -> dict[str, Any]:
    r = await company.issuer.post(
        f"/{company.tenant.slug}/poppy/session-state",
        json={"client_id": agent.client_id, "sid": "sid-1", "sub": "user-1", "jti": unique("jti-"),
              "iat": company.now(), "sgn": sgn},
        headers={"Authorization": f"Bearer {company.credential}"})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_device_grant_issues_a_dpop_bound_access_token_and_a_refresh_token(
    company: Company, agent: TestAgent, db: Any,
) -> None:
    r = await sign_in_1_0(company, agent)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert set(body) == ACCESS_MEMBERS  # no session_id, no signed_in [S §5]
    assert body["token_type"] == "DPoP" and body["expires_in"] == 900 and body["scope"] == "poppy:read poppy:write"
    claims = await verified(company, body["access_token"])
    assert claims.aud == company.tenant.issuer and claims.sub == "acct-10" and claims.client_id == agent.client_id
    assert claims.jkt == agent.dpop_key.thumbprint() and claims.exp - claims.iat == 900
    row = await db.fetchrow("SELECT profile, user_id, account_id, type FROM sign_ins WHERE tenant_id = $1 AND id = $2",
                            company.tenant.id, claims.sgn)
    assert dict(row) == {"profile": "1.0", "user_id": None, "account_id": "acct-10", "type": "device"}
    # No 0.2 Session was made, and the agent is listed for the dashboard at first sight.
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1 AND client_id = $2",
                             company.tenant.id, agent.client_id) == 0
    assert await db.fetchval("SELECT client_name FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             company.tenant.id, agent.client_id) == agent.name
    s = await session_state(company, agent, claims.sgn)
    assert s["signed_in"] is True and s["account"] == "acct-10"


async def test_without_a_dpop_proof_the_token_is_bearer(company: Company, agent: TestAgent) -> None:
    r = await sign_in_1_0(company, agent, dpop=False)
    assert r.status_code == 200, r.text
    assert r.json()["token_type"] == "Bearer"
    assert (await verified(company, r.json()["access_token"])).cnf is None


async def test_resource_must_be_a_protected_resource(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: ShiftableClock,
    store: DeviceStore, agent: TestAgent,
) -> None:
    api = "https://api.shop.example/v1"
    company = await make_company(console, issuer, tenant, clock, store,
                                 apis=[{"type": "openapi", "url": api, "description": "Orders"}])
    wrong = await sign_in_1_0(company, agent, extra={"resource": "https://elsewhere.example"})
    assert_refusal(wrong, 400, "invalid_target")
    r = await sign_in_1_0(company, agent, extra={"resource": api})
    assert r.status_code == 200, r.text
    claims = await verified(company, r.json()["access_token"], audiences=[api])
    assert claims.aud == api
    with pytest.raises(ProtocolError):  # valid for that resource only, not for the issuer
        await verified(company, r.json()["access_token"])


async def test_refresh_rotates_detects_reuse_and_narrows(company: Company, agent: TestAgent, db: Any,
                                                         web: MockWeb) -> None:
    first = (await sign_in_1_0(company, agent)).json()
    sgn = (await verified(company, first["access_token"])).sgn
    r = await company.refresh(agent, first["refresh_token"], scope="poppy:read")
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == ACCESS_MEMBERS and body["token_type"] == "DPoP" and body["scope"] == "poppy:read"
    claims = await verified(company, body["access_token"])
    assert claims.sgn == sgn and claims.scope == "poppy:read"
    assert body["refresh_token"] != first["refresh_token"]
    # Widening needs a new sign-in.
    assert_refusal(await company.refresh(agent, body["refresh_token"], scope="poppy:read poppy:admin"),
                   400, "invalid_scope")
    # The replaced token is refused and its reuse audited; the family's current token still works.
    assert_refusal(await company.refresh(agent, first["refresh_token"]), 400, "invalid_grant")
    assert await db.fetchval("SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = $2 AND target_id = $3",
                             company.tenant.id, "account_token.reuse_detected", sgn) == 1
    again = await company.refresh(agent, body["refresh_token"])
    assert again.status_code == 200, again.text
    assert again.json()["scope"] == "poppy:read poppy:write"  # the family keeps its scope
    # A 1.0 family signs no 0.2 Session in.
    session = await company.session(agent, "alice")
    assert_refusal(await company.refresh(agent, again.json()["refresh_token"], session_id=session["session_id"]),
                   400, "invalid_grant")
    # Another agent cannot use it.
    assert_refusal(await company.refresh(agent, again.json()["refresh_token"], client=new_agent(web)),
                   400, "invalid_grant")


async def test_revoking_the_refresh_token_signs_the_family_out_at_session_state(
    company: Company, agent: TestAgent, db: Any,
) -> None:
    body = (await sign_in_1_0(company, agent, "acct-rev")).json()
    sgn = (await verified(company, body["access_token"])).sgn
    assert (await session_state(company, agent, sgn))["signed_in"] is True
    r = await company.revoke(agent, body["refresh_token"])
    assert r.status_code == 200, r.text
    assert (await session_state(company, agent, sgn))["signed_in"] is False
    assert_refusal(await company.refresh(agent, body["refresh_token"]), 400, "invalid_grant")
    # account.revoked is recorded for the 1.0 sign-in, with a null user_id.
    payload = await db.fetchval("SELECT payload FROM session_events WHERE tenant_id = $1 AND type = 'account.revoked'"
                                " AND payload->>'sign_in_id' = $2", company.tenant.id, sgn)
    assert payload is not None
    data = json.loads(payload) if isinstance(payload, str) else payload
    assert data["user_id"] is None and data["account"] == "acct-rev" and data["reason"] == "revoked_by_agent"


async def test_disconnect_signs_the_family_out_at_session_state(
    console: AsyncTestClient[Any], company: Company, agent: TestAgent,
) -> None:
    body = (await sign_in_1_0(company, agent, "acct-dis")).json()
    sgn = (await verified(company, body["access_token"])).sgn
    r = await console.post("/api/v1/accounts/acct-dis/disconnect", json={}, headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    assert (await session_state(company, agent, sgn))["signed_in"] is False
    assert_refusal(await company.refresh(agent, body["refresh_token"]), 400, "invalid_grant")


async def test_0_2_is_unchanged_beside_1_0(company: Company, agent: TestAgent) -> None:
    """A tenant serving both: a request with session_id is the 0.2 grant it always was."""
    signed = await company.sign_in(agent, "alice", "acct-02")
    assert signed["signed_in"] is True and signed["session_id"].startswith("ses_")
    assert signed["token_type"] == "DPoP" and "refresh_token" in signed
    # A 0.2 family refreshed without session_id still gets a fresh 0.2 Session.
    r = await company.refresh(agent, signed["refresh_token"])
    assert r.status_code == 200, r.text
    assert r.json()["signed_in"] is True and r.json()["session_id"] != signed["session_id"]


async def test_refusals_when_a_profile_is_not_served(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    clock: ShiftableClock, store: DeviceStore, agent: TestAgent,
) -> None:
    only_1_0 = await make_company(console, issuer, tenant, clock, store,
                                  protocol={"served": ["1.0"], "published": "1.0"})
    metadata = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    assert "urn:ietf:params:oauth:grant-type:jwt-bearer" not in metadata["grant_types_supported"]
    now = only_1_0.now()
    bearer = await only_1_0.post_token(agent, {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "assertion": agent.session_assertion(tenant.issuer, "alice", iat=now, exp=now + 120)})
    assert_refusal(bearer, 400, "unsupported_grant_type")
    started = (await only_1_0.device(agent, "poppy:read")).json()
    await only_1_0.approve(started["user_code"], "acct-1", "poppy:read")
    with_session = await only_1_0.post_token(agent, {"grant_type": DEVICE_CODE, "device_code": started["device_code"],
                                                     "session_id": "ses_anything"})
    assert_refusal(with_session, 400, "invalid_request")
    done = await only_1_0.post_token(agent, {"grant_type": DEVICE_CODE, "device_code": started["device_code"]})
    assert done.status_code == 200 and set(done.json()) == ACCESS_MEMBERS
    assert_refusal(await only_1_0.refresh(agent, done.json()["refresh_token"], session_id="ses_x"),
                   400, "invalid_grant")

    only_0_2 = await make_company(console, issuer, other_tenant, clock, store,
                                  protocol={"served": ["0.2"], "published": "0.2"})
    started = (await only_0_2.device(agent, "poppy:read")).json()
    no_session = await only_0_2.post_token(agent, {"grant_type": DEVICE_CODE, "device_code": started["device_code"]})
    assert_refusal(no_session, 400, "invalid_request")


async def test_sign_in_for_1_0_needs_private_key_jwt_and_redirect_uris_declared(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: ShiftableClock,
    store: DeviceStore, web: MockWeb,
) -> None:
    """[S §3]: the 0.2 default for token_endpoint_auth_method does not count as declared for 1.0."""
    company = await make_company(console, issuer, tenant, clock, store)
    for drop in ("token_endpoint_auth_method", "redirect_uris"):
        thin = TestAgent(host=f"{unique('thin-')}.example").publish(web)
        web.serve(thin.client_id, json={k: v for k, v in thin.metadata().items() if k != drop},
                  headers={"cache-control": "max-age=300"})
        assert_refusal(await sign_in_1_0(company, thin), 400, "unauthorized_client")


async def test_session_state_and_agent_keys_are_rate_limited_per_credential(
    company: Company, agent: TestAgent, console: AsyncTestClient[Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from frontdoor_issuer.http import poppy_state

    from tests.integration.signin.conftest import resource_credential

    monkeypatch.setattr(poppy_state, "SESSION_STATE_PER_CREDENTIAL_PER_MINUTE", 2)
    monkeypatch.setattr(poppy_state, "AGENT_KEYS_PER_CREDENTIAL_PER_MINUTE", 1)
    await room_in_window(60, needed_s=15)  # each endpoint's calls fall in one minute of its limit
    for _ in range(2):
        await session_state(company, agent, "sgn_none")
    r = await company.issuer.post(
        f"/{company.tenant.slug}/poppy/session-state",
        json={"client_id": agent.client_id, "sid": "sid-1", "sub": "user-1", "jti": unique("jti-"),
              "iat": company.now()}, headers={"Authorization": f"Bearer {company.credential}"})
    assert r.status_code == 429 and r.json()["error"] == "rate_limited"
    assert 0 < int(r.headers["retry-after"]) <= 60 and r.headers["cache-control"] == "no-store"
    # Per credential: another credential of the tenant is not limited by this one's use.
    other = await resource_credential(console, company.tenant)
    fresh = await company.issuer.post(
        f"/{company.tenant.slug}/poppy/session-state",
        json={"client_id": agent.client_id, "sid": "sid-1", "sub": "user-1", "jti": unique("jti-"),
              "iat": company.now()}, headers={"Authorization": f"Bearer {other}"})
    assert fresh.status_code == 200, fresh.text
    keys = f"/{company.tenant.slug}/poppy/agent-keys"
    auth = {"Authorization": f"Bearer {company.credential}"}
    assert (await company.issuer.post(keys, json={"client_id": agent.client_id}, headers=auth)).status_code == 200
    limited = await company.issuer.post(keys, json={"client_id": agent.client_id}, headers=auth)
    assert limited.status_code == 429 and "retry-after" in limited.headers


async def test_a_session_seen_first_at_session_state_lists_its_agent(
    company: Company, web: MockWeb, db: Any,
) -> None:
    seen = new_agent(web)
    await session_state(company, seen, "sgn_none")
    row = await db.fetchrow("SELECT client_name, first_seen_at FROM agents WHERE tenant_id = $1 AND client_id = $2",
                            company.tenant.id, seen.client_id)
    assert row is not None and row["client_name"] == seen.name and row["first_seen_at"] is not None


async def test_two_tenants_a_family_is_unusable_at_another_tenant(
    company: Company, other_company: Company, agent: TestAgent,
) -> None:
    body = (await sign_in_1_0(company, agent)).json()
    sgn = (await verified(company, body["access_token"])).sgn
    assert_refusal(await other_company.refresh(agent, body["refresh_token"]), 400, "invalid_grant")
    assert (await other_company.revoke(agent, body["refresh_token"])).status_code == 200
    assert (await session_state(company, agent, sgn))["signed_in"] is True
    assert (await session_state(other_company, agent, sgn))["signed_in"] is False


@pytest.fixture
async def other_company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], other_tenant: TenantHandle,
                        clock: ShiftableClock, store: DeviceStore) -> Company:
    return await make_company(console, issuer, other_tenant, clock, store)

