"""Direct and Device Sign-In through the company's OpenID Provider, as a user lives them, in headless Chromium.

The tenant's ``login`` is an ``oidc`` connection to a real ``oidc-provider`` (npm, started by
the test on loopback); the issuer serves on a real loopback socket (dev mode, as with ``make
run``) and reaches the IdP over a real socket too. The agent's authorize URL is opened in the
browser: Frontdoor sends it to the IdP's own login page (PKCE S256, ``state``, ``nonce``), the
user signs in and agrees there, the IdP redirects to ``{issuer}/oidc/callback`` (RFC 9207
``iss``), Frontdoor's consent page names the account the IdP vouched for, Allow redirects to
the agent's ``redirect_uri`` with ``code``, ``state`` and ``iss``, and the code redeems into
the agent's tokens (PAP §4.5). Device Sign-In (PAP §4.6) starts at the verification URL the
agent shows: the user enters the code, Continue sends the browser to the IdP (the device page's
``form-action`` must allow that redirect), and after Frontdoor's consent the agent's poll gets
its tokens. Chromium enforces the pages' Content-Security-Policy on the way.
"""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient
from playwright.async_api import expect

from tests.browser.test_issuer_sign_in_journeys import (  # noqa: F401 (the fixtures this module shares)
    AgentCallback,
    LoopbackAgent,
    Stage,
    _authorize_url,
    _pkce,
    _serving,
    issuer_port,
    page,
    signin_console,
    signin_settings,
    signin_web,
)
from tests.conftest import unique
from tests.integration.conftest import sign_up
from tests.integration.signin.conftest import resource_credential
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import IdpInternet, OpenIdProvider, new_key

pytestmark = pytest.mark.browser

SECRET = "idp-secret-" + secrets.token_urlsafe(24)
SLUGS = [f"oidcb{secrets.token_hex(3)}-{i}" for i in range(4)]
POLICY = OutboundPolicy(allow_http_loopback=True)
_slugs = itertools.count()


@pytest.fixture(scope="module")
def browser_idp(issuer_port: int) -> Iterator[OpenIdProvider]:  # noqa: F811
    client = {"client_id": "fd-browser", "client_secret": SECRET, "token_endpoint_auth_method": "client_secret_basic",
              "redirect_uris": [f"http://127.0.0.1:{issuer_port}/{s}/oidc/callback" for s in SLUGS],
              "grant_types": ["authorization_code"], "response_types": ["code"]}
    provider = OpenIdProvider([client], new_key("idp-browser-1"))
    try:
        yield provider
    finally:
        provider.stop()


@pytest.fixture(scope="module")
async def oidc_issuer(signin_settings: Settings, migrated: str, signin_web: MockWeb,  # noqa: F811
                      clock: ShiftableClock, issuer_port: int, browser_idp: OpenIdProvider  # noqa: F811
                      ) -> AsyncIterator[IdpInternet]:
    """The issuer on its loopback socket; its outbound network reaches the IdP for real, the agents in `MockWeb`."""
    from frontdoor_issuer.app import create_app

    internet = IdpInternet(signin_web, POLICY)
    internet.add(browser_idp)
    app = create_app(signin_settings, clock=clock, fetcher=SafeFetcher(POLICY, transport=internet))
    async with _serving(app, issuer_port):
        yield internet


@pytest.fixture
async def oidc_stage(signin_console: AsyncTestClient[Any], oidc_issuer: IdpInternet,  # noqa: F811
                     signin_web: MockWeb, clock: ShiftableClock,  # noqa: F811
                     browser_idp: OpenIdProvider) -> AsyncIterator[Stage]:
    """A tenant whose users sign in at the IdP, an agent and its callback server."""
    t = await sign_up(signin_console, slug=SLUGS[next(_slugs)], organization_name="Acme")
    settings = (await signin_console.get("/api/v1/issuer", headers=t.auth)).json()["settings"]
    settings.update(organization_name="Acme", custom_scopes={"orders:read": "See your orders"},
                    direct={"enabled": True, "scopes": ["poppy:read", "orders:read"]},
                    device={"enabled": True, "scopes": ["poppy:read", "orders:read"]},
                    login={"type": "oidc", "issuer": browser_idp.issuer, "client_id": "fd-browser",
                           "client_secret": SECRET, "token_endpoint_auth_method": "client_secret_basic"})
    r = await signin_console.put("/api/v1/issuer", json=settings, headers=t.auth)
    assert r.status_code == 200, r.text
    async with AgentCallback() as callback, httpx.AsyncClient() as http:
        agent = LoopbackAgent(host="127.0.0.1", name="Pocket Assistant",
                              base=f"http://127.0.0.1:{callback.port}/{unique('agent-')}").publish(signin_web)
        yield Stage(tenant=t, northwind="", agent=agent, callback=callback, clock=clock, http=http)


async def test_direct_sign_in_through_the_idps_login_page(page: Any, oidc_stage: Stage,  # noqa: F811
                                                          browser_idp: OpenIdProvider,
                                                          oidc_issuer: IdpInternet) -> None:
    stage = oidc_stage
    # The IdP's pages @import a web font; this browser has no internet to fetch it from.
    await page.route("https://fonts.googleapis.com/**", lambda route: route.abort())
    session_id = await stage.session("ada-in-her-browser")
    verifier, challenge = _pkce()
    state = secrets.token_urlsafe(16)

    at_idp: list[str] = []
    page.on("request", lambda r: at_idp.append(r.url) if r.url.startswith(f"{browser_idp.issuer}/auth?") else None)
    await page.goto(_authorize_url(stage, state, challenge))
    # Frontdoor sent the browser to the IdP's authorization endpoint (PKCE S256, state, nonce) ...
    assert len(at_idp) == 1, at_idp
    sent_to_idp = {k: v[0] for k, v in parse_qs(urlsplit(at_idp[0]).query).items()}
    assert sent_to_idp["client_id"] == "fd-browser" and sent_to_idp["code_challenge_method"] == "S256"
    assert sent_to_idp["redirect_uri"] == f"{stage.tenant.issuer}/oidc/callback"
    assert sent_to_idp["state"] and sent_to_idp["nonce"] and sent_to_idp["state"] != state
    await expect(page).to_have_url(re.compile(rf"^{re.escape(browser_idp.issuer)}/interaction/"))
    await expect(page.locator("h1")).to_have_text("Sign-in")
    # ... whose own login page the user signs in on.
    await page.fill("input[name=login]", "ada")
    await page.fill("input[name=password]", "any password")
    await page.click("button:has-text('Sign-in')")
    await page.click("button:has-text('Continue')")  # the IdP's own consent to Frontdoor's client
    # Back at Frontdoor: its consent page names the account the IdP vouched for.
    await expect(page).to_have_url(f"{stage.tenant.issuer}/consent")
    await expect(page.locator("h1")).to_have_text("Allow Pocket Assistant to act for you?")
    await expect(page.locator("main")).to_contain_text("ada")
    await page.uncheck("input[value='poppy:read']")  # the user grants less than asked
    await page.click("button:has-text('Allow')")
    await expect(page.locator("h1")).to_have_text("Back at your assistant")

    # The IdP's code was redeemed with the PKCE verifier and the client secret (Basic).
    sent = oidc_issuer.token_requests[-1]
    assert sent.url.path == "/token" and sent.headers["authorization"].startswith("Basic ")
    assert "code_verifier" in parse_qs(sent.content.decode())

    answer = await stage.arrival()
    assert set(answer) == {"code", "state", "iss"}, answer
    assert answer["state"] == state and answer["iss"] == stage.tenant.issuer  # RFC 9207
    token = await stage.token({"grant_type": "authorization_code", "code": answer["code"], "code_verifier": verifier,
                               "redirect_uri": stage.agent.redirect_uri, "session_id": session_id})
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["signed_in"] is True and body["scope"] == "orders:read"
    assert body["session_id"] == session_id and body["refresh_token"].startswith("fdat_")
    assert urlsplit(page.url).netloc == urlsplit(stage.agent.redirect_uri).netloc


async def _log_in_at_the_idp(tab: Any, idp: OpenIdProvider, login: str) -> None:
    """The IdP's own pages: its login form, then its consent to Frontdoor's client."""
    await expect(tab).to_have_url(re.compile(rf"^{re.escape(idp.issuer)}/interaction/"))
    await expect(tab.locator("h1")).to_have_text("Sign-in")
    await tab.fill("input[name=login]", login)
    await tab.fill("input[name=password]", "any password")
    await tab.click("button:has-text('Sign-in')")
    await tab.click("button:has-text('Continue')")


async def test_device_sign_in_through_the_idps_login_page(page: Any, oidc_stage: Stage,  # noqa: F811
                                                          browser_idp: OpenIdProvider, oidc_issuer: IdpInternet,
                                                          signin_console: AsyncTestClient[Any]) -> None:  # noqa: F811
    stage = oidc_stage
    credential = await resource_credential(signin_console, stage.tenant)
    await page.route("https://fonts.googleapis.com/**", lambda route: route.abort())
    session_id = await stage.session("grace-on-her-phone")
    started = await stage.device("poppy:read orders:read")
    pending = await stage.poll(started["device_code"], session_id)
    assert pending.status_code == 400 and pending.json()["error"] == "authorization_pending", pending.text
    assert started["verification_uri"] == f"{stage.tenant.issuer}/device"

    at_idp: list[str] = []
    page.on("request", lambda r: at_idp.append(r.url) if r.url.startswith(f"{browser_idp.issuer}/auth?") else None)
    refused: list[str] = []  # a CSP violation (the form's redirect to the IdP blocked) shows in the console
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    # The user opens the link the agent showed, on any browser, and types the code it showed.
    await page.goto(started["verification_uri"])
    await page.fill("input[name=user_code]", started["user_code"].lower())
    await page.click("button:has-text('Continue')")
    # Continue posts to Frontdoor, which redirects the form's POST to the IdP (PKCE S256, state, nonce).
    await _log_in_at_the_idp(page, browser_idp, "grace")
    assert len(at_idp) == 1, at_idp
    sent = {k: v[0] for k, v in parse_qs(urlsplit(at_idp[0]).query).items()}
    assert sent["client_id"] == "fd-browser" and sent["code_challenge_method"] == "S256"
    assert sent["redirect_uri"] == f"{stage.tenant.issuer}/oidc/callback" and sent["state"] and sent["nonce"]
    assert not refused, refused
    # Back at Frontdoor: its consent page names the account the IdP vouched for, and the code.
    await expect(page).to_have_url(f"{stage.tenant.issuer}/consent")
    await expect(page.locator("h1")).to_have_text("Allow Pocket Assistant to act for you?")
    await expect(page.locator("main")).to_contain_text("grace")
    await expect(page.locator("main")).to_contain_text(f"code {started['user_code']}")
    await page.uncheck("input[value='poppy:read']")
    await page.click("button:has-text('Allow')")
    await expect(page.locator("h1")).to_have_text("You're connected")
    assert urlsplit(page.url).netloc == urlsplit(stage.tenant.issuer).netloc

    sent_token = oidc_issuer.token_requests[-1]  # the IdP's code, redeemed with the verifier and the secret
    assert sent_token.headers["authorization"].startswith("Basic ")
    assert "code_verifier" in parse_qs(sent_token.content.decode())
    stage.clock.advance(seconds=6)  # the agent waits its interval before polling again
    token = await stage.poll(started["device_code"], session_id)
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["signed_in"] is True and body["scope"] == "orders:read" and body["session_id"] == session_id
    assert body["refresh_token"].startswith("fdat_")
    seen = await stage.http.post(f"{stage.tenant.issuer}/oauth/introspect", data={"token": body["access_token"]},
                                 headers={"Authorization": f"Bearer {credential}"})
    assert seen.status_code == 200 and seen.json()["account"] == "grace", seen.text  # the IdP's sub
