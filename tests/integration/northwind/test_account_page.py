"""Northwind's "connected agents" page and the issuer endpoint behind it, with the real issuer.

Frontdoor is the in-process issuer (PostgreSQL, Redis); agents sign in through Device
Sign-In with the user's approval given straight to the `DeviceStore` (the pages are
tested in ``tests/integration/signin``). Northwind runs in-process; its server-to-server
calls reach the issuer through a transport that forwards to the issuer's test client,
and a cookie-keeping client plays the customer's browser.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig, create_app
from northwind.account_page import ACCOUNT_COOKIE
from northwind.config import DEFAULT_DEMO_PASSWORD

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import Company, configure, make_company
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

PUBLIC_URL = "https://northwind.example"
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')
SCOPE = "orders:read poppy:read"


def forwarding_client(issuer: AsyncTestClient[Any]) -> httpx.AsyncClient:
    """Northwind's outbound client: every request goes to the in-process issuer."""

    async def forward(request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        r = await issuer.request(request.method, request.url.raw_path.decode(), content=request.content,
                                 headers=headers)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    return httpx.AsyncClient(transport=httpx.MockTransport(forward))


@dataclass
class Stage:
    company: Company
    browser: httpx.AsyncClient
    web: MockWeb

    def agent(self, name: str = "Poppy Helper") -> TestAgent:
        return TestAgent(host=f"{unique('agent-')}.example", name=name).publish(self.web)

    async def connect(self, agent: TestAgent, account: str, user: str = "u1") -> dict[str, Any]:
        return await self.company.sign_in(agent, user, account, scope=SCOPE, granted=SCOPE)

    async def sign_in(self, email: str = "ada@northwind.example", password: str = DEFAULT_DEMO_PASSWORD
                      ) -> httpx.Response:
        page = await self.browser.get("/account/login")
        assert page.status_code == 200
        fields = dict(HIDDEN.findall(page.text))
        return await self.browser.post("/account/login", data={"csrf": html.unescape(fields["csrf"]),
                                                               "email": email, "password": password})

    async def agents_page(self) -> httpx.Response:
        return await self.browser.get("/account/agents")


def disconnect_forms(page: httpx.Response) -> dict[str, str]:
    """client_id -> csrf of each disconnect form on the page."""
    out = {}
    for form in re.findall(r'<form method="post" action="/account/agents/disconnect">(.*?)</form>', page.text):
        fields = {k: html.unescape(v) for k, v in HIDDEN.findall(form)}
        out[fields["client_id"]] = fields["csrf"]
    return out


@pytest.fixture
async def stage(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                clock: ShiftableClock, runtime: Any, web: MockWeb) -> AsyncIterator[Stage]:
    store = DeviceStore(runtime.redis, clock=clock)
    company = await make_company(console, issuer, tenant, clock, store,
                                 custom_scopes={"orders:read": "See your orders"})
    await configure(console, tenant, device={"enabled": True, "scopes": ["orders:read", "poppy:read"]})
    async with forwarding_client(issuer) as to_issuer:
        config = NorthwindConfig(issuer=tenant.issuer, credential=company.credential, public_url=PUBLIC_URL,
                                 poppy={"auth": {"issuer": tenant.issuer}}, http_client=to_issuer, clock=clock)
        app = create_app(config)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=PUBLIC_URL,
                                     follow_redirects=True) as browser:
            yield Stage(company=company, browser=browser, web=web)


async def test_a_customer_sees_their_connected_agents_and_disconnects_one(stage: Stage) -> None:
    poppy, other = stage.agent("Poppy Helper"), stage.agent("Atlas")
    signed = await stage.connect(poppy, "acct_ada")
    kept = await stage.connect(other, "acct_ada", user="u2")
    await stage.connect(stage.agent("Grace's agent"), "acct_grace", user="u3")

    page = await stage.sign_in()
    assert page.status_code == 200 and str(page.url).endswith("/account/agents")
    assert "Ada Lovelace" in page.text and "Poppy Helper" in page.text and "Atlas" in page.text
    assert "Grace&#x27;s agent" not in page.text and "Grace's agent" not in page.text  # only Ada's agents
    assert "orders:read" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    forms = disconnect_forms(page)
    assert set(forms) == {poppy.client_id, other.client_id}

    r = await stage.browser.post("/account/agents/disconnect",
                                 data={"csrf": forms[poppy.client_id], "client_id": poppy.client_id})
    assert r.status_code == 200 and str(r.url).endswith("/account/agents")
    assert "Poppy Helper" not in r.text and "Atlas" in r.text
    # Frontdoor signed the agent out at once; the other agent is untouched.
    gone = await stage.company.introspect(signed["access_token"])
    assert gone["active"] is True and gone["signed_in"] is False
    assert (await stage.company.introspect(kept["access_token"]))["signed_in"] is True
    refresh = await stage.company.refresh(poppy, signed["refresh_token"])
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"


async def test_the_page_needs_northwinds_own_sign_in(stage: Stage) -> None:
    r = await stage.agents_page()
    assert str(r.url).endswith("/account/login") and 'name="password"' in r.text
    wrong = await stage.sign_in(password="not the password")
    assert wrong.status_code == 401 and "do not match" in wrong.text
    unknown = await stage.sign_in(email="nobody@northwind.example")
    assert unknown.status_code == 401 and unknown.text.count("do not match") == 1
    assert ACCOUNT_COOKIE not in stage.browser.cookies


async def test_a_forged_or_tampered_cookie_is_not_a_sign_in(stage: Stage) -> None:
    await stage.connect(stage.agent(), "acct_grace")
    await stage.sign_in()  # Ada
    cookie = stage.browser.cookies[ACCOUNT_COOKIE]
    encoded, expires, mac = cookie.split(".")
    grace = "YWNjdF9ncmFjZQ"  # base64url("acct_grace")
    for forged in (f"{grace}.{expires}.{mac}", f"{encoded}.9999999999.{mac}", "acct_grace", ""):
        stage.browser.cookies.set(ACCOUNT_COOKIE, forged, domain="northwind.example", path="/account")
        r = await stage.agents_page()
        assert str(r.url).endswith("/account/login"), forged


async def test_forms_refuse_cross_site_posts(stage: Stage) -> None:
    agent = stage.agent()
    signed = await stage.connect(agent, "acct_ada")
    # The sign-in form needs its double-submit cookie.
    stage.browser.cookies.clear()
    r = await stage.browser.post("/account/login", data={"csrf": "x", "email": "ada@northwind.example",
                                                          "password": DEFAULT_DEMO_PASSWORD})
    assert r.status_code == 403 and ACCOUNT_COOKIE not in stage.browser.cookies
    # Signed in, a disconnect without the page's token changes nothing.
    await stage.sign_in()
    for csrf in ("", "forged"):
        r = await stage.browser.post("/account/agents/disconnect", data={"csrf": csrf, "client_id": agent.client_id})
        assert r.status_code == 403
    assert (await stage.company.introspect(signed["access_token"]))["signed_in"] is True


async def test_agent_names_are_escaped(stage: Stage) -> None:
    await stage.connect(stage.agent('<script>alert("x")</script>Evil'), "acct_ada")
    page = await stage.sign_in()
    assert "<script>" not in page.text and "&lt;script&gt;" in page.text


async def test_the_issuer_endpoint_needs_the_tenants_credential(stage: Stage, console: AsyncTestClient[Any],
                                                                 issuer: AsyncTestClient[Any],
                                                                 other_tenant: TenantHandle) -> None:
    t = stage.company.tenant
    await stage.connect(stage.agent(), "acct_ada")
    url = f"/{t.slug}/accounts/acct_ada/agents"
    r = await issuer.get(url)
    assert r.status_code == 401 and r.json()["code"] == "invalid_client"  # RFC 9457 problem details
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.headers["www-authenticate"].startswith("Bearer") and r.headers["cache-control"] == "no-store"
    other = await console.post("/api/v1/resource-credentials", json={"name": "x"}, headers=other_tenant.auth)
    r = await issuer.get(url, headers={"Authorization": f"Bearer {other.json()['secret']}"})
    assert r.status_code == 401
    r = await issuer.get(url, headers={"Authorization": f"Bearer {stage.company.credential}"})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    [agent] = r.json()["agents"]
    assert agent["scope"] == SCOPE and agent["sign_ins"] == 1 and agent["client_name"] == "Poppy Helper"
    # The same account ID at another tenant is another account.
    assert (await issuer.get(f"/{other_tenant.slug}/accounts/acct_ada/agents",
                             headers={"Authorization": f"Bearer {other.json()['secret']}"})).json()["agents"] == []


async def test_the_issuer_endpoint_lists_live_sign_ins_only(stage: Stage, issuer: AsyncTestClient[Any]) -> None:
    t, auth = stage.company.tenant, {"Authorization": f"Bearer {stage.company.credential}"}
    agent = stage.agent()
    first = await stage.connect(agent, "acct_ada", user="u1")
    await stage.connect(agent, "acct_ada", user="u2")  # a second device of the same agent
    listed = (await issuer.get(f"/{t.slug}/accounts/acct_ada/agents", headers=auth)).json()["agents"]
    assert [(a["client_id"], a["sign_ins"]) for a in listed] == [(agent.client_id, 2)]
    assert (await stage.company.revoke(agent, first["refresh_token"])).status_code == 200
    listed = (await issuer.get(f"/{t.slug}/accounts/acct_ada/agents", headers=auth)).json()["agents"]
    assert [(a["client_id"], a["sign_ins"]) for a in listed] == [(agent.client_id, 1)]
    r = await issuer.post(f"/{t.slug}/accounts/disconnect", json={"account": "acct_ada"}, headers=auth)
    assert r.status_code == 200
    assert (await issuer.get(f"/{t.slug}/accounts/acct_ada/agents", headers=auth)).json()["agents"] == []
    assert (await issuer.get(f"/{t.slug}/accounts/{'x' * 256}/agents", headers=auth)).status_code == 400
