"""The PAP 1.0 browser join hosted by the issuer, at the wire (ADR 0004 §8, [S §6]).

Step 1 ``GET {issuer}/join`` (code + same-response cookie, isolation headers), step 2
``POST {issuer}/join/authorize`` (the agent's Session header, optional access token, 204),
step 3 ``POST {issuer}/join/redeem`` (the browser, the code consumed first, a join
assertion posted to the company's callback). The agent side is signed with
``frontdoor_protocol.mint_delegation``/``mint_poppy_session``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest
from frontdoor_protocol import AccessTokenClaims, mint_access_token, mint_delegation, mint_poppy_session
from frontdoor_protocol.join_assertion import verify_join_assertion
from frontdoor_sessions.sign_in import complete_delegated_sign_in
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_tenancy.signing_keys import load_signer
from joserfc.jwk import ECKey, KeySet
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.issuer.test_pap10_issuer_endpoints import _dashboard_revoke
from tests.integration.signin.conftest import configure
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

COOKIE = "fd_join"  # tests run the issuer in development mode; production names it __Host-fd_join
_CODE = re.compile(r'<code id="poppy-join-code">([A-Za-z0-9_-]+)</code>')
_FORM = re.compile(r'<form id="poppy-join-continue" method="post" action="([^"]+)">\s*'
                   r'<input type="hidden" name="assertion" value="([^"]+)">')


class Signer:
    """A 1.0 agent on top of the published TestAgent: its identity key delegates a P-256 key."""

    def __init__(self, agent: TestAgent, tenant: TenantHandle, clock: ShiftableClock, *, sub: str = "alice") -> None:
        self.agent, self.tenant, self.clock, self.sub = agent, tenant, clock, sub
        self.delegated = ECKey.generate_key("P-256")
        now = self.now()
        self.delegation = mint_delegation(identity_key=agent.key, kid=agent.kid, client_id=agent.client_id,
                                          delegated_key=self.delegated, iat=now - 5, exp=now + 3600,
                                          jti=unique("dlg-"))
        self.sid = unique("sid-")

    def now(self) -> int:
        return int(self.clock().timestamp())

    def headers(self, url: str, *, token: str | None = None, audience: str | None = None) -> dict[str, str]:
        jwt = mint_poppy_session(delegated_key=self.delegated, delegation=self.delegation,
                                 client_id=self.agent.client_id, audience=audience or self.tenant.issuer,
                                 sid=self.sid, sub=self.sub, method="POST", url=url, iat=self.now(),
                                 jti=unique("jti-"), access_token=token)
        out = {"Poppy-Session": jwt}
        if token is not None:
            out["Authorization"] = f"Bearer {token}"
        return out


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def offer_join(console: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, *,
                     published: str = "1.0") -> str:
    """Verify a domain and set the join callback on it; answers the callback URL."""
    domain = await verified_domain(console, tenant, dns)
    callback = f"https://{domain}/poppy/join"
    await configure(console, tenant, protocol={"served": ["0.2", "1.0"], "published": published,
                                               "join_callback_url": callback})
    return callback


async def step1(issuer: AsyncTestClient[Any], tenant: TenantHandle) -> tuple[str, str]:
    """A fresh browser asks for a code: (code, cookie)."""
    issuer.cookies.clear()
    r = await issuer.get(f"/{tenant.slug}/join")
    assert r.status_code == 200, r.text
    found = _CODE.search(r.text)
    assert found is not None
    cookie = r.cookies.get(COOKIE)
    assert cookie
    issuer.cookies.clear()
    return found.group(1), cookie


async def authorize(issuer: AsyncTestClient[Any], tenant: TenantHandle, signer: Signer, code: str, *,
                    token: str | None = None) -> Any:
    url = f"{tenant.issuer}/join/authorize"
    return await issuer.post(f"/{tenant.slug}/join/authorize", json={"code": code},
                             headers=signer.headers(url, token=token))


async def redeem(issuer: AsyncTestClient[Any], tenant: TenantHandle, code: str, cookie: str | None) -> Any:
    issuer.cookies.clear()
    if cookie is not None:
        issuer.cookies.set(COOKIE, cookie)
    r = await issuer.post(f"/{tenant.slug}/join/redeem", data={"code": code})
    issuer.cookies.clear()
    return r


async def issuer_keys(issuer: AsyncTestClient[Any], tenant: TenantHandle) -> KeySet:
    return KeySet.import_key_set((await issuer.get(f"/{tenant.slug}/jwks.json")).json())


async def access_token(runtime: Any, kek_value: str, tenant: TenantHandle, agent: TestAgent, clock: ShiftableClock,
                       *, account: str, scope: str) -> tuple[str, str]:
    """A 1.0 access token of a live sign-in: (token, sgn)."""
    async with runtime.pool.acquire() as conn:
        done = await complete_delegated_sign_in(conn, tenant_id=tenant.id, client_id=agent.client_id,
                                                account_id=account, granted_scope=scope, sign_in_type="device",
                                                now=clock())
        signer = await load_signer(conn, tenant.id, Kek.from_env_value(kek_value), clock())
    now = int(clock().timestamp())
    token = mint_access_token(AccessTokenClaims(
        iss=tenant.issuer, sub=account, aud=tenant.issuer, client_id=agent.client_id, scope=scope,
        jti=unique("at-"), iat=now, exp=now + 600, sgn=done.sign_in_id, cnf=None), signer.key, signer.kid)
    return token, done.sign_in_id


async def test_step_1_gives_a_fresh_code_and_its_cookie_with_isolation_headers(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, runtime: Any,
) -> None:
    """[S §6] step 1: short-lived unguessable one-use code, same-response protected cookie,
    no-store, frame isolation, opener isolation."""
    await offer_join(console, tenant, dns)
    issuer.cookies.clear()
    r = await issuer.get(f"/{tenant.slug}/join")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert "form-action 'self';" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["cross-origin-opener-policy"] == "same-origin"
    assert r.headers["referrer-policy"] == "no-referrer"
    set_cookie = r.headers["set-cookie"]
    assert set_cookie.startswith(f"{COOKIE}=")
    flags = {f.strip().lower() for f in set_cookie.split(";")[1:]}
    assert {"httponly", "path=/", "samesite=lax", "max-age=120"} <= flags
    code = _CODE.search(r.text)
    assert code is not None and len(code.group(1)) >= 43  # 256 bits, base64url
    assert f'action="{tenant.issuer}/join/redeem"' in r.text
    # Stored hashed: Redis holds neither the code nor the cookie.
    keys = [k.decode() for k in await runtime.redis.keys(f"join:{{{tenant.id}}}:*")]
    assert f"join:{{{tenant.id}}}:{hashlib.sha256(code.group(1).encode()).hexdigest()}" in keys
    record = await runtime.redis.hgetall(keys[0])
    assert all(code.group(1).encode() not in v and r.cookies[COOKIE].encode() not in v for v in record.values())
    again, _ = await step1(issuer, tenant)
    assert again != code.group(1)


async def test_the_three_steps_post_a_join_assertion_to_the_callback(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock, db: Any,
) -> None:
    callback = await offer_join(console, tenant, dns)
    signer = Signer(agent, tenant, clock)
    code, cookie = await step1(issuer, tenant)
    r = await authorize(issuer, tenant, signer, code)
    assert r.status_code == 204, r.text
    assert r.headers["cache-control"] == "no-store"
    page = await redeem(issuer, tenant, code, cookie)
    assert page.status_code == 200, page.text
    assert f"form-action 'self' https://{callback.split('/')[2]};" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store" and page.headers["referrer-policy"] == "no-referrer"
    assert '<script src="https://issuer.frontdoor.test/_static/join-continue.js">' in page.text
    form = _FORM.search(page.text)
    assert form is not None and form.group(1) == callback
    assert callback not in page.headers.get("location", "")  # never a redirect carrying the assertion
    claims = verify_join_assertion(form.group(2), issuer=tenant.issuer, audience=callback,
                                   keys=await issuer_keys(issuer, tenant), now=signer.now())
    session = await db.fetchval("SELECT id FROM pap_sessions WHERE tenant_id = $1 AND agent_sid = $2",
                                tenant.id, signer.sid)
    assert (claims.client_id, claims.sid, claims.sub, claims.session) == (agent.client_id, signer.sid, "alice",
                                                                          session)
    assert claims.account is None and claims.scope is None and claims.sgn is None  # a guest
    assert 0 < claims.exp - claims.iat <= 60
    # One use: the code is gone, for the browser and for the agent.
    again = await redeem(issuer, tenant, code, cookie)
    assert again.status_code == 400 and _FORM.search(again.text) is None
    reauth = await authorize(issuer, tenant, signer, code)
    assert reauth.status_code == 400 and reauth.json()["error"] == "invalid_grant"
    js = await issuer.get("/_static/join-continue.js")
    assert js.status_code == 200 and "poppy-join-continue" in js.text


async def test_a_signed_in_join_carries_the_live_token_account_and_scope(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock, runtime: Any, kek_value: str,
) -> None:
    await configure(console, tenant, device={"enabled": True, "scopes": ["poppy:read"]})
    callback = await offer_join(console, tenant, dns)
    token, sgn = await access_token(runtime, kek_value, tenant, agent, clock, account="acct-7", scope="poppy:read")
    signer = Signer(agent, tenant, clock)
    code, cookie = await step1(issuer, tenant)
    assert (await authorize(issuer, tenant, signer, code, token=token)).status_code == 204
    form = _FORM.search((await redeem(issuer, tenant, code, cookie)).text)
    assert form is not None
    claims = verify_join_assertion(form.group(2), issuer=tenant.issuer, audience=callback,
                                   keys=await issuer_keys(issuer, tenant), now=signer.now())
    assert (claims.account, claims.scope, claims.sgn) == ("acct-7", "poppy:read", sgn)
    # A token of a revoked sign-in is the token challenge, and the code stays unauthorized.
    r = await console.post("/api/v1/accounts/acct-7/disconnect", json={}, headers=tenant.auth)
    assert r.status_code == 200
    code2, _ = await step1(issuer, tenant)
    refused = await authorize(issuer, tenant, signer, code2, token=token)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"
    assert refused.headers["www-authenticate"].startswith("Bearer ")


@pytest.mark.parametrize("first", ["no_cookie", "another_browser", "not_authorized"])
async def test_the_first_submission_consumes_the_code_even_when_it_fails(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock, first: str,
) -> None:
    """[S §6]: "The first submission consumes the code even if validation fails"; never a
    code from a message or another browser."""
    await offer_join(console, tenant, dns)
    signer = Signer(agent, tenant, clock)
    code, cookie = await step1(issuer, tenant)
    _, other_cookie = await step1(issuer, tenant)  # another browser's own join
    if first != "not_authorized":
        assert (await authorize(issuer, tenant, signer, code)).status_code == 204
    failed = await redeem(issuer, tenant, code, {"no_cookie": None, "another_browser": other_cookie,
                                                 "not_authorized": cookie}[first])
    assert failed.status_code == 400 and _FORM.search(failed.text) is None
    assert "cross-origin-opener-policy" in failed.headers
    # The code is gone: the right browser cannot use it, nor can the agent authorize it.
    late = await authorize(issuer, tenant, signer, code)
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"
    retry = await redeem(issuer, tenant, code, cookie)
    assert retry.status_code == 400 and _FORM.search(retry.text) is None


async def test_a_code_is_authorized_once_and_expires(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock,
) -> None:
    await offer_join(console, tenant, dns)
    signer, other = Signer(agent, tenant, clock), Signer(agent, tenant, clock, sub="mallory")
    code, cookie = await step1(issuer, tenant)
    assert (await authorize(issuer, tenant, signer, code)).status_code == 204
    swap = await authorize(issuer, tenant, other, code)  # nobody swaps the Session under a code
    assert swap.status_code == 400 and swap.json()["error"] == "invalid_grant"
    unknown = await authorize(issuer, tenant, signer, "x" * 43)
    assert unknown.status_code == 400 and unknown.json()["error"] == "invalid_grant"
    stale, stale_cookie = await step1(issuer, tenant)
    authorized, authorized_cookie = await step1(issuer, tenant)
    assert (await authorize(issuer, tenant, signer, authorized)).status_code == 204
    clock.advance(seconds=121)
    late = await authorize(issuer, tenant, signer, stale)
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"
    expired = await redeem(issuer, tenant, authorized, authorized_cookie)
    assert expired.status_code == 400 and _FORM.search(expired.text) is None
    for body in ({"code": code, "extra": 1}, {"codes": code}, [code]):
        bad = await issuer.post(f"/{tenant.slug}/join/authorize", json=body,
                                headers=signer.headers(f"{tenant.issuer}/join/authorize"))
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"
    _ = (cookie, stale_cookie)


async def test_step_2_with_an_ended_or_invalid_session(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock, db: Any,
) -> None:
    """ADR 0004 §7: an ended Session is 400 session_ended; a bad header 400 invalid_session."""
    await offer_join(console, tenant, dns)
    signer = Signer(agent, tenant, clock)
    code, _ = await step1(issuer, tenant)
    missing = await issuer.post(f"/{tenant.slug}/join/authorize", json={"code": code})
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_session"
    assert "www-authenticate" not in missing.headers
    wrong_url = await issuer.post(f"/{tenant.slug}/join/authorize", json={"code": code},
                                  headers=signer.headers(f"{tenant.issuer}/join/redeem"))
    assert wrong_url.status_code == 400 and wrong_url.json()["error"] == "invalid_session"
    assert (await authorize(issuer, tenant, signer, code)).status_code == 204
    session = await db.fetchval("SELECT id FROM pap_sessions WHERE tenant_id = $1 AND agent_sid = $2",
                                tenant.id, signer.sid)
    await _dashboard_revoke(console, tenant, session)
    code2, _ = await step1(issuer, tenant)
    ended = await authorize(issuer, tenant, signer, code2)
    assert ended.status_code == 400 and ended.json()["error"] == "session_ended"
    assert "www-authenticate" not in ended.headers


async def test_two_tenants_are_isolated(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, agent: TestAgent, clock: ShiftableClock,
) -> None:
    await offer_join(console, tenant, dns)
    await offer_join(console, other_tenant, dns)
    mine, theirs = Signer(agent, tenant, clock), Signer(agent, other_tenant, clock)
    code, cookie = await step1(issuer, tenant)
    # A's code at B: unknown there, and B's redeem consumes nothing of A's.
    assert (await authorize(issuer, other_tenant, theirs, code)).json()["error"] == "invalid_grant"
    assert (await redeem(issuer, other_tenant, code, cookie)).status_code == 400
    # A Session JWT for A's issuer is not accepted at B.
    r = await issuer.post(f"/{other_tenant.slug}/join/authorize", json={"code": code},
                          headers=mine.headers(f"{other_tenant.issuer}/join/authorize"))
    assert r.status_code == 400 and r.json()["error"] == "invalid_session"
    assert (await authorize(issuer, tenant, mine, code)).status_code == 204
    assert _FORM.search((await redeem(issuer, tenant, code, cookie)).text) is not None


async def test_offered_only_with_a_callback_and_advertised_only_then(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, agent: TestAgent, clock: ShiftableClock,
) -> None:
    """[S §6]: advertise web.browser_session_endpoint only with all three steps in place."""
    domain = await verified_domain(console, other_tenant, dns)
    await configure(console, other_tenant, protocol={"served": ["0.2", "1.0"], "published": "1.0"})
    poppy = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=other_tenant.auth)).json()
    assert "browser_session_endpoint" not in poppy.get("web", {})
    assert (await issuer.get(f"/{other_tenant.slug}/join")).status_code == 404
    callback = await offer_join(console, tenant, dns)
    joined_domain = callback.split("/")[2]
    poppy = (await console.get(f"/api/v1/domains/{joined_domain}/poppy.json", headers=tenant.auth)).json()
    assert poppy["web"]["browser_session_endpoint"] == f"{tenant.issuer}/join"
    # A 0.2 document keeps the company's own endpoint (none here) whatever the 1.0 callback.
    await configure(console, tenant, protocol={"served": ["0.2", "1.0"], "published": "0.2",
                                               "join_callback_url": callback})
    poppy = (await console.get(f"/api/v1/domains/{joined_domain}/poppy.json", headers=tenant.auth)).json()
    assert "browser_session_endpoint" not in poppy.get("web", {})
    bad = await console.put("/api/v1/issuer", headers=tenant.auth, json={
        **(await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"],
        "protocol": {"served": ["1.0"], "published": "1.0", "join_callback_url": "https://shop.example/j?x=1"}})
    assert bad.status_code == 422 and "protocol.join_callback_url" in bad.text


async def test_a_callback_off_the_verified_domains_gets_no_assertion(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock,
) -> None:
    await configure(console, tenant, protocol={"served": ["1.0"], "published": "1.0",
                                               "join_callback_url": "https://elsewhere.example/poppy/join"})
    signer = Signer(agent, tenant, clock)
    code, cookie = await step1(issuer, tenant)
    assert (await authorize(issuer, tenant, signer, code)).status_code == 204
    r = await redeem(issuer, tenant, code, cookie)
    assert r.status_code == 409 and _FORM.search(r.text) is None
