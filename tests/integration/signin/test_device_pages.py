"""Device Sign-In as the user lives it: Frontdoor's device page, the company's login (the
signed handoff), the consent page; and what those pages refuse (CSRF, framing, stale flows)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from frontdoor_sdk import build_login_response, login_signing_key, verify_login_request
from joserfc.jwk import KeySet
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, configure, make_company
from tests.support.agent import TestAgent
from tests.support.fixed_windows import room_in_window

LOGIN = "https://login.shop.example/signin"


def csrf(html: str) -> str:
    m = re.search(r'name="_csrf_token" value="([^"]+)"', html)
    assert m, html[:500]
    return m.group(1)


async def setup(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, clock: Any,
                store: Any) -> tuple[Company, Any]:
    key = login_signing_key()
    public = {k: v for k, v in key.as_dict(private=False).items()}
    public["kid"] = key.kid
    company = await make_company(console, issuer, tenant, clock, store,
                                 custom_scopes={"orders:read": "See your orders"},
                                 login={"url": LOGIN, "public_jwk": public})
    await configure(console, tenant, device={"enabled": True, "scopes": ["poppy:read", "orders:read"]})
    return company, key


async def company_login(issuer: AsyncTestClient[Any], t: TenantHandle, location: str, key: Any,
                        account: str) -> str:
    """What the company's login page does: verify the request, authenticate, answer signed."""
    assert location.startswith(LOGIN + "?request=")
    request_jwt = parse_qs(urlsplit(location).query)["request"][0]
    keys = KeySet.import_key_set((await issuer.get(f"/{t.slug}/jwks.json")).json())
    now = datetime.now(UTC)
    req = await verify_login_request(request_jwt, issuer=t.issuer, issuer_keys=keys,
                                     login_origin="https://login.shop.example", now=now)
    assert req.return_to == f"{t.issuer}/login/callback"
    return build_login_response(account_id=account, request_jti=req.jti, login_origin="https://login.shop.example",
                                issuer=t.issuer, key=key, kid=key.kid, now=now)


async def test_device_sign_in_through_the_pages(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                               tenant: TenantHandle, agent: TestAgent, clock: Any, store: Any,
                                               db: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "alice")
    started = (await company.device(agent, "poppy:read orders:read")).json()
    assert started["verification_uri"] == f"{tenant.issuer}/device"

    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device", params={"user_code": started["user_code"]})
    assert page.status_code == 200
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    # Opening the link approves nothing.
    assert (await company.poll(agent, started["device_code"], session["session_id"])).json()["error"] == \
        "authorization_pending"

    r = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"].lower().replace("-", " "),
                                                           "_csrf_token": csrf(page.text)}, follow_redirects=False)
    assert r.status_code == 303, r.text
    response = await company_login(issuer, tenant, r.headers["location"], key, "acct_ada")

    r = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"{tenant.issuer}/consent"
    consent = await issuer.get(f"/{tenant.slug}/consent")
    assert consent.status_code == 200
    assert agent.name in consent.text and agent.host in consent.text and "See your orders" in consent.text
    assert "acct_ada" in consent.text
    # The user grants a subset.
    done = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                               "scope": ["orders:read"], "decision": "allow"})
    assert done.status_code == 200 and "connected" in done.text

    clock.advance(seconds=6)  # the agent waits its interval before polling again
    token = await company.poll(agent, started["device_code"], session["session_id"])
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["signed_in"] is True and body["scope"] == "orders:read"
    assert body["session_id"] == session["session_id"] and body["refresh_token"]
    state = await company.introspect(body["access_token"])
    assert state["account"] == "acct_ada" and state["scope"] == "orders:read"
    # The response was used once: replaying it is refused.
    replay = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response})
    assert replay.status_code == 400


async def test_pages_refuse_csrf_and_bad_codes_and_deny_works(console: AsyncTestClient[Any],
                                                              issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                              agent: TestAgent, clock: Any, store: Any) -> None:
    company, key = await setup(console, issuer, tenant, clock, store)
    session = await company.session(agent, "bob")
    started = (await company.device(agent, "poppy:read")).json()
    issuer.cookies.clear()
    no_csrf = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"]})
    assert no_csrf.status_code == 403
    page = await issuer.get(f"/{tenant.slug}/device")
    bad = await issuer.post(f"/{tenant.slug}/device", data={"user_code": "BBBB-BBBB", "_csrf_token": csrf(page.text)})
    assert bad.status_code == 400 and "not valid" in bad.text
    r = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"],
                                                           "_csrf_token": csrf(page.text)}, follow_redirects=False)
    response = await company_login(issuer, tenant, r.headers["location"], key, "acct_bob")
    await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response})
    consent = await issuer.get(f"/{tenant.slug}/consent")
    denied = await issuer.post(f"/{tenant.slug}/consent", data={"_csrf_token": csrf(consent.text),
                                                                 "decision": "deny"})
    assert "denied" in denied.text.lower()
    assert (await company.poll(agent, started["device_code"], session["session_id"])).json()["error"] == \
        "access_denied"


async def test_a_login_answer_needs_the_browser_that_asked(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                           tenant: TenantHandle, agent: TestAgent, clock: Any,
                                                           store: Any) -> None:
    """A response forwarded to another browser (no flow cookie) cannot reach consent."""
    company, key = await setup(console, issuer, tenant, clock, store)
    await company.session(agent, "carol")
    started = (await company.device(agent, "poppy:read")).json()
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device")
    r = await issuer.post(f"/{tenant.slug}/device", data={"user_code": started["user_code"],
                                                           "_csrf_token": csrf(page.text)}, follow_redirects=False)
    response = await company_login(issuer, tenant, r.headers["location"], key, "acct_carol")
    issuer.cookies.clear()  # another browser
    other = await issuer.post(f"/{tenant.slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert other.status_code == 400
    assert "fd_flow" not in other.headers.get("set-cookie", "")


async def test_guessing_codes_is_answered_with_a_429_page(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any],
                                                         tenant: TenantHandle, clock: Any, store: Any) -> None:
    await setup(console, issuer, tenant, clock, store)
    issuer.cookies.clear()
    page = await issuer.get(f"/{tenant.slug}/device")
    statuses = []
    await room_in_window(60, needed_s=15)  # the 11 tries fall in one minute of the per-requester count
    for _ in range(11):  # the requester may miss 10 times a minute
        r = await issuer.post(f"/{tenant.slug}/device", data={"user_code": "BBBB-BBBB", "_csrf_token": csrf(page.text)})
        statuses.append(r.status_code)
    assert statuses == [400] * 10 + [429], statuses
    assert int(r.headers["retry-after"]) > 0 and "Too many codes" in r.text
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
