"""The browser join (PAP §5) at the issuer: ``/browser/verify`` and ``/browser/state``.

The company's website hands Frontdoor the assertion an agent's browser posted, with its
resource-server credential; Frontdoor checks it against the agent's published keys, the
tenant's ``browser_session_endpoint`` and verified domains, the Session, and a one-use
``jti``, then answers a browser session token whose state follows the Session.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import pytest
from frontdoor_sessions.session_store import sign_in_session, sign_out_sessions
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle, sign_up
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

BROWSER_TYP = {"typ": "poppy-browser+jwt"}


@dataclass
class Company:
    tenant: TenantHandle
    domain: str
    credential: str

    @property
    def endpoint(self) -> str:
        return f"https://{self.domain}/poppy/browser"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.credential}"}


async def onboard(console: AsyncTestClient[Any], dns: LocalDNS, tenant: TenantHandle, *,
                  offer_browser: bool = True) -> Company:
    """A verified domain, the browser session endpoint on it, and a resource-server credential."""
    domain = f"{unique('shop-')}.example.com"
    claim = (await console.post("/api/v1/domains", json={"domain": domain}, headers=tenant.auth)).json()
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    assert (await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)).json()["status"] == "verified"
    dns.remove(claim["txt"]["name"])
    if offer_browser:
        current = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]
        current["browser_session_endpoint"] = f"https://{domain}/poppy/browser"
        r = await console.put("/api/v1/issuer", json=current, headers=tenant.auth)
        assert r.status_code == 200, r.text
        doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
        assert doc["web"] == {"browser_session_endpoint": f"https://{domain}/poppy/browser"}
    r = await console.post("/api/v1/resource-credentials", json={"name": "website"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    return Company(tenant=tenant, domain=domain, credential=str(r.json()["secret"]))


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


@pytest.fixture
async def company(console: AsyncTestClient[Any], dns: LocalDNS, tenant: TenantHandle) -> Company:
    return await onboard(console, dns, tenant)


async def start_session(issuer: AsyncTestClient[Any], t: TenantHandle, agent: TestAgent, user: str) -> str:
    r = await issuer.post(f"/{t.slug}/oauth/token", data=agent.token_form(t.issuer, user),
                          headers={"DPoP": agent.dpop("POST", f"{t.issuer}/oauth/token")})
    assert r.status_code == 200, r.text
    return str(r.json()["session_id"])


def browser_assertion(agent: TestAgent, c: Company, user: str, session_id: str, *, header: dict[str, Any] | None = None,
                      **over: Any) -> str:
    now = int(time.time())
    claims = {"iss": agent.client_id, "sub": user, "aud": c.endpoint, "session_id": session_id,
              "return_to": f"https://{c.domain}/orders/1", "iat": now, "exp": now + 60,
              "jti": secrets.token_urlsafe(16)}
    claims.update(over)
    return agent._sign({k: v for k, v in claims.items() if v is not None}, BROWSER_TYP if header is None else header)


async def verify(issuer: AsyncTestClient[Any], c: Company, assertion: str, *, auth: dict[str, str] | None = None) -> Any:
    return await issuer.post(f"/{c.tenant.slug}/browser/verify", data={"assertion": assertion},
                             headers=c.auth if auth is None else auth)


async def state(issuer: AsyncTestClient[Any], c: Company, token: str) -> Any:
    r = await issuer.post(f"/{c.tenant.slug}/browser/state", data={"browser_session": token}, headers=c.auth)
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store", r.text
    return r.json()


async def test_a_browser_joins_and_its_state_follows_the_session(
    issuer: AsyncTestClient[Any], console: AsyncTestClient[Any], company: Company, agent: TestAgent, db: Any,
) -> None:
    sid = await start_session(issuer, company.tenant, agent, "alice")
    r = await verify(issuer, company, browser_assertion(agent, company, "alice", sid))
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store", r.text
    joined = r.json()
    assert joined["return_to"] == f"https://{company.domain}/orders/1"
    assert joined["state"] == {"active": True, "client_id": agent.client_id, "sub": "alice", "sid": sid,
                               "signed_in": False, "account": None, "scope": None}
    token = joined["browser_session"]
    assert token.startswith("fdbs_")
    assert await state(issuer, company, token) == joined["state"]

    # Signed in, then out: the next view shows it (PAP-5-10).
    now = await db.fetchval("SELECT now()")
    await sign_in_session(db, company.tenant.id, sid, account_id="acct_ada", scope="orders:read", sign_in_id="si_1",
                          now=now)
    signed = await state(issuer, company, token)
    assert signed["signed_in"] is True and signed["account"] == "acct_ada" and signed["scope"] == "orders:read"
    await sign_out_sessions(db, company.tenant.id, ["si_1"])
    assert (await state(issuer, company, token))["signed_in"] is False

    # Blocking the agent ends its Sessions: the browser's token dies with them (PAP-5-11).
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=company.tenant.auth)
    assert r.status_code == 200
    assert await state(issuer, company, token) == {"active": False}


async def test_refused_assertions(issuer: AsyncTestClient[Any], company: Company, agent: TestAgent,
                                  web: MockWeb) -> None:
    sid = await start_session(issuer, company.tenant, agent, "alice")
    other_sid = await start_session(issuer, company.tenant, agent, "bob")
    stranger = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    cases = {
        "a Session assertion": browser_assertion(agent, company, "alice", sid, header={"typ": "JWT"}),
        "no typ": browser_assertion(agent, company, "alice", sid, header={}),
        "a foreign return_to": browser_assertion(agent, company, "alice", sid, return_to="https://evil.example/"),
        "a look-alike return_to": browser_assertion(agent, company, "alice", sid,
                                                    return_to=f"https://evil{company.domain}/"),
        "another user's Session": browser_assertion(agent, company, "bob", sid),
        "another agent's Session": browser_assertion(stranger, company, "alice", sid),
        "no such Session": browser_assertion(agent, company, "alice", "ses_nope"),
        "a long-lived assertion": browser_assertion(agent, company, "alice", sid, exp=int(time.time()) + 600),
        "an expired assertion": browser_assertion(agent, company, "alice", sid, iat=int(time.time()) - 200,
                                                  exp=int(time.time()) - 140),
        "another audience": browser_assertion(agent, company, "alice", sid, aud=f"https://{company.domain}/elsewhere"),
        "another key": agent._sign({"iss": agent.client_id}, BROWSER_TYP, key=TestAgent(host="x.example").key),
    }
    for what, assertion in cases.items():
        r = await verify(issuer, company, assertion)
        assert r.status_code == 400, (what, r.text)
        assert r.json()["error"] == "invalid_assertion" and "browser_session" not in r.json(), what
    reasons = {what: (await verify(issuer, company, a)).json()["reason"] for what, a in list(cases.items())[:3]}
    assert reasons == {"a Session assertion": "wrong_type", "no typ": "wrong_type",
                       "a foreign return_to": "foreign_return_to"}

    once = browser_assertion(agent, company, "bob", other_sid)
    assert (await verify(issuer, company, once)).status_code == 200
    replayed = await verify(issuer, company, once)
    assert replayed.status_code == 400 and replayed.json()["reason"] == "replayed"


async def test_a_browser_assertion_is_not_a_session_assertion(issuer: AsyncTestClient[Any], company: Company,
                                                              agent: TestAgent) -> None:
    """PAP-5-05, the other way round: the token endpoint refuses a browser assertion."""
    t = company.tenant
    form = agent.token_form(t.issuer, "alice")
    now = int(time.time())
    form["assertion"] = agent._sign({"iss": agent.client_id, "sub": "alice", "aud": t.issuer, "iat": now,
                                     "exp": now + 60, "jti": secrets.token_urlsafe(16)}, BROWSER_TYP)
    r = await issuer.post(f"/{t.slug}/oauth/token", data=form,
                          headers={"DPoP": agent.dpop("POST", f"{t.issuer}/oauth/token")})
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"


async def test_only_the_tenants_credential_and_a_tenant_that_offers_it(
    issuer: AsyncTestClient[Any], console: AsyncTestClient[Any], dns: LocalDNS, company: Company, agent: TestAgent,
) -> None:
    sid = await start_session(issuer, company.tenant, agent, "alice")
    other = await onboard(console, dns, await sign_up(console), offer_browser=False)
    assertion = browser_assertion(agent, company, "alice", sid)
    for auth in ({}, {"Authorization": "Bearer fdrs_nope"}, other.auth):
        r = await verify(issuer, company, assertion, auth=auth)
        assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    # A tenant without the setting offers no browser sessions.
    r = await verify(issuer, other, browser_assertion(agent, other, "alice", sid))
    assert r.status_code == 400 and r.json()["reason"] == "not_offered"
    bad_form = await issuer.post(f"/{company.tenant.slug}/browser/verify", json={"assertion": assertion},
                                 headers=company.auth)
    assert bad_form.status_code == 400 and bad_form.json()["error"] == "invalid_request"


async def test_browser_tokens_are_this_tenants_genuine_and_recent(
    issuer: AsyncTestClient[Any], console: AsyncTestClient[Any], dns: LocalDNS, company: Company, agent: TestAgent,
    clock: ShiftableClock,
) -> None:
    sid = await start_session(issuer, company.tenant, agent, "alice")
    token = (await verify(issuer, company, browser_assertion(agent, company, "alice", sid))).json()["browser_session"]
    body, _, mac = token.partition(".")
    for forged in ("", "fdbs_x.y", f"{body}.{mac[:-2]}AA", f"{body}x.{mac}", token + "."):
        assert await state(issuer, company, forged or "-") == {"active": False}
    other = await onboard(console, dns, await sign_up(console))
    assert await state(issuer, other, token) == {"active": False}  # another tenant's token
    clock.advance(hours=24, seconds=5)
    assert await state(issuer, company, token) == {"active": False}  # joined too long ago
