"""Device and Direct Sign-In as a user lives them, in a real browser (headless Chromium).

The issuer serves on a real loopback socket (dev mode, as with ``make run``); the
company is Northwind, the example company, on another loopback port, with its real login
page and its signed login handoff; the agent's ``redirect_uri`` is a loopback server of
the test. Chromium enforces the pages' Content-Security-Policy, ``form-action`` included,
on the redirects that follow a form's POST: Continue on the device page is followed by a
303 to the company's login page (another origin), Allow or Deny on a Direct Sign-In's
consent page by a 303 to the agent's ``redirect_uri``. Each journey goes to its end: the
agent's device poll gets its tokens, or the browser arrives at the ``redirect_uri`` with
``code``, ``state`` and ``iss`` (RFC 9207) and the code redeems (PAP §4.5, §4.6).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.settings import Settings, load_settings
from frontdoor_sdk import login_jwks, login_signing_key
from litestar.testing import AsyncTestClient
from playwright.async_api import expect

from tests.conftest import unique
from tests.integration.conftest import TenantHandle, sign_up
from tests.support.agent import CLIENT_ASSERTION_TYPE, JWT_BEARER, TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.eventually import eventually
from tests.support.mock_web import MockWeb

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
SCOPES = ["poppy:read", "orders:read"]
DEMO_PASSWORD = secrets.token_urlsafe(12)  # Northwind's demo accounts, for this run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def _serving(app: Any, port: int) -> AsyncIterator[str]:
    """``app`` under uvicorn on ``127.0.0.1:port`` until the block ends."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())

    async def started() -> None:
        assert server.started or task.done()

    await eventually(started, timeout=10)
    assert server.started, "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


class AgentCallback:
    """The agent's ``redirect_uri``: a loopback HTTP server that records where browsers arrive."""

    def __init__(self) -> None:
        self.arrivals: list[str] = []  # the request targets (path and query)
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> AgentCallback:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            if method == "GET" and not target.startswith("/favicon"):
                self.arrivals.append(target)
            body = b"<!doctype html><title>Agent</title><h1>Back at your assistant</h1>"
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        finally:
            writer.close()


@dataclass
class LoopbackAgent(TestAgent):
    """A dev-mode agent whose ``client_id`` and ``redirect_uri`` are on a loopback port.

    The issuer fetches its metadata and keys from the pretend internet (`MockWeb`, keyed by
    host and path); only the browser's arrival at ``redirect_uri`` goes over a socket.
    """

    base: str = ""

    @property
    def client_id(self) -> str:
        return f"{self.base}/agent.json"

    @property
    def redirect_uri(self) -> str:
        return f"{self.base}/callback"

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "jwks_uri": f"{self.base}/jwks.json", "redirect_uris": [self.redirect_uri]}

    def publish(self, web: MockWeb) -> LoopbackAgent:
        web.serve(self.client_id, json=self.metadata(), headers={"cache-control": "max-age=300"})
        web.serve(f"{self.base}/jwks.json", json=self.jwks(), headers={"cache-control": "max-age=300"})
        return self


@dataclass
class Stage:
    """A tenant whose login page is Northwind's, its issuer on a socket, and one agent."""

    tenant: TenantHandle
    northwind: str
    agent: LoopbackAgent
    callback: AgentCallback
    clock: ShiftableClock
    http: httpx.AsyncClient

    @property
    def token_url(self) -> str:
        return f"{self.tenant.issuer}/oauth/token"

    def _now(self) -> int:
        return int(self.clock().timestamp())

    def _client(self) -> dict[str, str]:
        now = self._now()
        return {"client_id": self.agent.client_id, "client_assertion_type": CLIENT_ASSERTION_TYPE,
                "client_assertion": self.agent.client_assertion(self.tenant.issuer, iat=now, exp=now + 60)}

    async def token(self, form: dict[str, str]) -> httpx.Response:
        proof = self.agent.dpop("POST", self.token_url, iat=self._now())
        return await self.http.post(self.token_url, data={**self._client(), **form}, headers={"DPoP": proof})

    async def session(self, user: str) -> str:
        now = self._now()
        r = await self.token({"grant_type": JWT_BEARER,
                              "assertion": self.agent.session_assertion(self.tenant.issuer, user, iat=now,
                                                                        exp=now + 120)})
        assert r.status_code == 200, r.text
        return str(r.json()["session_id"])

    async def device(self, scope: str) -> dict[str, Any]:
        r = await self.http.post(f"{self.tenant.issuer}/oauth/device", data={**self._client(), "scope": scope})
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def poll(self, device_code: str, session_id: str) -> httpx.Response:
        return await self.token({"grant_type": DEVICE_CODE, "device_code": device_code, "session_id": session_id})

    async def arrival(self) -> dict[str, str]:
        """The query the browser brought to the agent's ``redirect_uri`` (one of each value)."""

        async def arrived() -> None:
            assert self.callback.arrivals, "the browser never reached the agent's redirect_uri"

        await eventually(arrived, timeout=5)
        assert len(self.callback.arrivals) == 1, self.callback.arrivals
        target = urlsplit(self.callback.arrivals[0])
        assert target.path == urlsplit(self.agent.redirect_uri).path, target
        values = parse_qs(target.query)
        assert all(len(v) == 1 for v in values.values()), values
        return {k: v[0] for k, v in values.items()}


@pytest.fixture(scope="module")
def issuer_port() -> int:
    return _free_port()


@pytest.fixture(scope="module")
def signin_settings(settings: Settings, dns: LocalDNS, issuer_port: int) -> Settings:
    """Dev mode (http:// on loopback, SameSite=Lax flow cookie) with the issuer on its own free port."""
    return load_settings({
        "FRONTDOOR_ENV": "dev",
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "FRONTDOOR_KEK": settings.kek,
        "FRONTDOOR_DNS_NAMESERVERS": f"127.0.0.1:{dns.port}",
        "FRONTDOOR_DNS_TIMEOUT": "1s",
        "FRONTDOOR_ISSUER_BASE_URL": f"http://127.0.0.1:{issuer_port}",
        "FRONTDOOR_SIGNUP_RATE_LIMIT": "100000",
    })


@pytest.fixture(scope="module")
def signin_web() -> MockWeb:
    """Where the issuer fetches the agents' metadata and keys."""
    return MockWeb()


@pytest.fixture(scope="module")
async def signin_issuer(signin_settings: Settings, migrated: str, signin_web: MockWeb, clock: ShiftableClock,
                        issuer_port: int) -> AsyncIterator[str]:
    """The real issuer app on a loopback socket: the browser, Northwind and the agent reach it there."""
    from frontdoor_issuer.app import create_app

    fetcher = SafeFetcher(OutboundPolicy(allow_http_loopback=True), transport=signin_web)
    async with _serving(create_app(signin_settings, clock=clock, fetcher=fetcher), issuer_port) as url:
        yield url


@pytest.fixture(scope="module")
async def signin_console(signin_settings: Settings, migrated: str, clock: ShiftableClock
                         ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The management API, in-process: sign-up and the tenant's issuer settings."""
    from frontdoor_console.app import create_app

    async with AsyncTestClient(create_app(signin_settings, clock=clock), base_url="http://127.0.0.1:8000") as client:
        yield client


@pytest.fixture
async def page(browser: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A fresh browser profile; on failure, a screenshot of each of its pages."""
    ctx = await browser.new_context(viewport={"width": 1100, "height": 800})
    ctx.set_default_timeout(5000)
    failed_before = request.session.testsfailed
    try:
        yield await ctx.new_page()
    finally:
        if request.session.testsfailed > failed_before:
            ARTIFACTS.mkdir(exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
            for i, p in enumerate(ctx.pages):
                await p.screenshot(path=str(ARTIFACTS / f"{name}-{i}.png"), full_page=True)
        await ctx.close()


@pytest.fixture
async def stage(signin_console: AsyncTestClient[Any], signin_issuer: str, signin_web: MockWeb,
                clock: ShiftableClock) -> AsyncIterator[Stage]:
    """A tenant signed in through Northwind, Northwind serving, an agent and its callback server."""
    from northwind import NorthwindConfig
    from northwind import create_app as northwind_app

    t = await sign_up(signin_console, organization_name="Northwind")
    nw_port = _free_port()
    northwind = f"http://127.0.0.1:{nw_port}"
    key = login_signing_key()
    settings = (await signin_console.get("/api/v1/issuer", headers=t.auth)).json()["settings"]
    settings.update(organization_name="Northwind", custom_scopes={"orders:read": "See your orders"},
                    device={"enabled": True, "scopes": SCOPES}, direct={"enabled": True, "scopes": SCOPES},
                    login={"url": f"{northwind}/login", "public_jwk": login_jwks(key)["keys"][0]})
    r = await signin_console.put("/api/v1/issuer", json=settings, headers=t.auth)
    assert r.status_code == 200, r.text
    config = NorthwindConfig(issuer=t.issuer, credential="fdrs_unused-by-the-login-page", public_url=northwind,
                             poppy={}, signing_key=key, demo_password=DEMO_PASSWORD)
    async with AgentCallback() as callback, _serving(northwind_app(config), nw_port), httpx.AsyncClient() as http:
        agent = LoopbackAgent(host="127.0.0.1", name="Pocket Assistant",
                              base=f"http://127.0.0.1:{callback.port}/{unique('agent-')}").publish(signin_web)
        yield Stage(tenant=t, northwind=northwind, agent=agent, callback=callback, clock=clock, http=http)


async def _sign_in_at_northwind(page: Any, stage: Stage) -> None:
    """The company's own login page: it shows who asks, the user signs in, it hands back."""
    await expect(page).to_have_url(re.compile(rf"^{re.escape(stage.northwind)}/login\?request="))
    await expect(page.locator("main")).to_contain_text("Pocket Assistant asks to connect to your Northwind account")
    await page.fill("input[name=email]", "ada@northwind.example")
    await page.fill("input[name=password]", DEMO_PASSWORD)
    await page.click("button:has-text('Sign in')")
    # Northwind's handoff form posts (by its script) to the issuer's callback, which sends the browser to consent.
    await expect(page).to_have_url(f"{stage.tenant.issuer}/consent")
    await expect(page.locator("h1")).to_have_text("Allow Pocket Assistant to act for you?")
    await expect(page.locator("main")).to_contain_text("acct_ada")


async def test_device_sign_in_from_the_link_to_the_agents_tokens(page: Any, stage: Stage) -> None:
    session_id = await stage.session("ada-on-her-phone")
    started = await stage.device("poppy:read orders:read")
    pending = await stage.poll(started["device_code"], session_id)
    assert pending.status_code == 400 and pending.json()["error"] == "authorization_pending", pending.text

    await page.goto(started["verification_uri_complete"])
    await expect(page.locator("input[name=user_code]")).to_have_value(started["user_code"])
    await page.click("button:has-text('Continue')")
    await _sign_in_at_northwind(page, stage)
    await expect(page.locator("main")).to_contain_text(f"code {started['user_code']}")
    await page.uncheck("input[value='poppy:read']")  # the user grants less than asked
    await page.click("button:has-text('Allow')")
    await expect(page.locator("h1")).to_have_text("You're connected")

    stage.clock.advance(seconds=6)  # the agent waits its interval before polling again
    token = await stage.poll(started["device_code"], session_id)
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["signed_in"] is True and body["scope"] == "orders:read"
    assert body["session_id"] == session_id
    assert body["refresh_token"].startswith("fdat_") and body["access_token"]


async def test_device_sign_in_with_a_typed_code_after_a_wrong_one(page: Any, stage: Stage) -> None:
    session_id = await stage.session("ada-at-her-desk")
    started = await stage.device("orders:read")

    await page.goto(started["verification_uri"])
    await page.fill("input[name=user_code]", "BBBB-BBBB")
    await page.click("button:has-text('Continue')")
    await expect(page.locator("p.error")).to_contain_text("not valid")
    # The page that answered the wrong code carries the form again: its Continue must work too.
    await page.fill("input[name=user_code]", started["user_code"].lower().replace("-", " "))
    await page.click("button:has-text('Continue')")
    await _sign_in_at_northwind(page, stage)
    await page.click("button:has-text('Allow')")
    await expect(page.locator("h1")).to_have_text("You're connected")

    token = await stage.poll(started["device_code"], session_id)
    assert token.status_code == 200, token.text
    assert token.json()["scope"] == "orders:read" and token.json()["signed_in"] is True


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def _authorize_url(stage: Stage, state: str, challenge: str) -> str:
    return f"{stage.tenant.issuer}/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": stage.agent.client_id, "redirect_uri": stage.agent.redirect_uri,
        "scope": "poppy:read orders:read", "state": state, "code_challenge": challenge,
        "code_challenge_method": "S256"})


async def test_direct_sign_in_arrives_at_the_agents_redirect_uri_and_the_code_redeems(page: Any,
                                                                                     stage: Stage) -> None:
    session_id = await stage.session("ada-in-her-browser")
    verifier, challenge = _pkce()
    state = secrets.token_urlsafe(16)

    await page.goto(_authorize_url(stage, state, challenge))
    await _sign_in_at_northwind(page, stage)
    await page.click("button:has-text('Allow')")
    await expect(page.locator("h1")).to_have_text("Back at your assistant")
    assert page.url.startswith(stage.agent.redirect_uri + "?")

    answer = await stage.arrival()
    assert set(answer) == {"code", "state", "iss"}, answer
    assert answer["state"] == state and answer["iss"] == stage.tenant.issuer  # RFC 9207
    token = await stage.token({"grant_type": "authorization_code", "code": answer["code"], "code_verifier": verifier,
                               "redirect_uri": stage.agent.redirect_uri, "session_id": session_id})
    assert token.status_code == 200, token.text
    body = token.json()
    assert body["signed_in"] is True and body["scope"] == "poppy:read orders:read"
    assert body["session_id"] == session_id and body["refresh_token"].startswith("fdat_")
    # The code is one-use.
    again = await stage.token({"grant_type": "authorization_code", "code": answer["code"], "code_verifier": verifier,
                               "redirect_uri": stage.agent.redirect_uri, "session_id": session_id})
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant", again.text


async def test_direct_sign_in_denied_arrives_at_the_redirect_uri_with_access_denied(page: Any,
                                                                                    stage: Stage) -> None:
    _, challenge = _pkce()
    state = secrets.token_urlsafe(16)

    await page.goto(_authorize_url(stage, state, challenge))
    await _sign_in_at_northwind(page, stage)
    await page.click("button:has-text('Deny')")
    await expect(page.locator("h1")).to_have_text("Back at your assistant")

    answer = await stage.arrival()
    assert answer["error"] == "access_denied", answer
    assert answer["state"] == state and answer["iss"] == stage.tenant.issuer
    assert "code" not in answer
