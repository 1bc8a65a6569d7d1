"""PAP 1.0 Direct Sign-In at the wire (ADR 0004 §4, [S §3], [S §5], RFC 8252 §7.3): the
same pages, then an ``authorization_code`` redemption without ``session_id`` that answers
an access token and the refresh token; loopback redirect URIs on any port for 1.0 only."""

from __future__ import annotations

from typing import Any

from frontdoor_protocol.access_token import verify_access_token
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, assert_refusal, configure
from tests.integration.signin.test_device_pages import csrf
from tests.integration.signin.test_direct_sign_in import Started, authorize, callback, params, setup, to_consent
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb


def loopback_agent(web: MockWeb) -> TestAgent:
    """A native agent: an HTTPS redirect_uri and an RFC 8252 loopback one (no port)."""
    agent = TestAgent(host=f"{unique('native-')}.example").publish(web)
    doc = {**agent.metadata(), "redirect_uris": [f"https://{agent.host}/callback", "http://127.0.0.1/callback"]}
    web.serve(agent.client_id, json=doc, headers={"cache-control": "max-age=300"})
    return agent


async def allow(issuer: AsyncTestClient[Any], t: TenantHandle, key: Any, query: dict[str, str],
                started: Started) -> dict[str, str]:
    consent = await to_consent(issuer, t, key, query)
    decided = await issuer.post(f"/{t.slug}/consent", data={"_csrf_token": csrf(consent.text), "decision": "allow",
                                                            "scope": query["scope"].split(" ")},
                                follow_redirects=False)
    assert decided.status_code == 303, decided.text
    return callback(decided.headers["location"], started)


async def redeem(company: Company, agent: TestAgent, code: str, started: Started, **extra: str) -> Any:
    return await company.post_token(agent, {"grant_type": "authorization_code", "code": code,
                                            "code_verifier": started.verifier, "redirect_uri": started.redirect_uri,
                                            **extra})


async def test_direct_sign_in_the_1_0_way_at_a_loopback_redirect_uri(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any, store: Any,
    web: MockWeb, db: Any,
) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    agent = loopback_agent(web)
    redirect = "http://127.0.0.1:53682/callback"  # a port the OS picked: any port matches [RFC 8252 §7.3]
    query, started = params(agent, redirect_uri=redirect)
    started = Started(state=started.state, verifier=started.verifier, redirect_uri=redirect)
    answer = await allow(issuer, tenant, key, query, started)
    assert answer["iss"] == tenant.issuer and answer["state"] == started.state
    r = await redeem(company, agent, answer["code"], started)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "scope", "refresh_token"}
    assert body["token_type"] == "DPoP" and body["scope"] == "poppy:read orders:read"
    jwks = (await issuer.get(f"/{tenant.slug}/jwks.json")).json()
    claims = verify_access_token(body["access_token"], issuer=tenant.issuer, keys=KeySet.import_key_set(jwks),
                                 now=company.now())
    assert claims.sub == "acct_ada" and claims.client_id == agent.client_id
    assert await db.fetchval("SELECT type FROM sign_ins WHERE tenant_id = $1 AND id = $2 AND profile = '1.0'",
                             tenant.id, claims.sgn) == "direct"
    # Presented again: invalid_grant, and what the first redemption issued is revoked.
    assert_refusal(await redeem(company, agent, answer["code"], started), 400, "invalid_grant")
    assert await db.fetchval("SELECT revoke_reason FROM sign_ins WHERE tenant_id = $1 AND id = $2", tenant.id,
                             claims.sgn) == "authorization_code_reused"


async def test_a_loopback_code_is_not_redeemable_for_a_0_2_session(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any, store: Any,
    web: MockWeb,
) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    agent = loopback_agent(web)
    redirect = "http://127.0.0.1:40001/callback"
    query, started = params(agent, redirect_uri=redirect)
    started = Started(state=started.state, verifier=started.verifier, redirect_uri=redirect)
    answer = await allow(issuer, tenant, key, query, started)
    session = await company.session(agent, "alice")
    assert_refusal(await redeem(company, agent, answer["code"], started, session_id=session["session_id"]),
                   400, "invalid_grant")


async def test_loopback_redirect_uris_must_match_a_registered_loopback(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any, store: Any,
    web: MockWeb,
) -> None:
    await setup(console, issuer, tenant, clock, store)
    agent = loopback_agent(web)
    for wrong in ("http://127.0.0.1:53682/other", "http://[::1]:53682/callback", "http://localhost:53682/callback"):
        query, _ = params(agent, redirect_uri=wrong)
        r = await authorize(issuer, tenant, query)
        assert r.status_code == 400 and "location" not in r.headers  # shown, never redirected


async def test_a_tenant_serving_only_0_2_matches_redirect_uris_exactly(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any, store: Any,
    web: MockWeb,
) -> None:
    """PAP-4.5-01 unchanged for 0.2: a loopback registration is not a redirect_uri there."""
    await configure(console, tenant, protocol={"served": ["0.2"], "published": "0.2"})
    await setup(console, issuer, tenant, clock, store)
    agent = loopback_agent(web)
    query, _ = params(agent, redirect_uri="http://127.0.0.1:53682/callback")
    r = await authorize(issuer, tenant, query)
    assert r.status_code == 400 and "location" not in r.headers
    query, _ = params(agent)  # its HTTPS redirect_uri still works
    assert (await authorize(issuer, tenant, query)).status_code == 303
