"""Northwind's website for agents' browsers (PAP §5), in-process against a fake Frontdoor.

The fake answers ``/browser/verify`` and ``/browser/state`` from what the test sets: the
assertion checks themselves are Frontdoor's (tests/integration/issuer/test_browser_verify.py);
here it is the company's side: the 303, the cookie and its flags, the pages following the
Session, and failing closed.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from frontdoor_sdk import BROWSER_COOKIE
from northwind import NorthwindConfig, create_app

from tests.integration.northwind.fake_frontdoor import (
    CLIENT_ID,
    CREDENTIAL,
    ISSUER,
    NOW,
    PUBLIC_URL,
    FakeFrontdoor,
    SessionState,
)

POPPY = {
    "protocol_version": "0.2",
    "organization": {"name": "Northwind", "domain": "northwind.example"},
    "auth": {"issuer": ISSUER},
    "web": {"browser_session_endpoint": f"{PUBLIC_URL}/poppy/browser"},
}
JOIN = f"{PUBLIC_URL}/poppy/browser"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@dataclass
class Join:
    sid: str
    return_to: str
    user: str = "usr_1"


@dataclass
class BrowserFrontdoor(FakeFrontdoor):
    """The fake issuer, plus the browser join: ``joins`` maps an assertion to its Session."""

    joins: dict[str, Join] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # browser session token -> sid
    down: bool = False
    calls: int = 0

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self._browser))

    def _browser(self, request: httpx.Request) -> httpx.Response:
        path = str(request.url)
        if path not in (f"{ISSUER}/browser/verify", f"{ISSUER}/browser/state"):
            return self._handle(request)
        self.calls += 1
        if self.down:
            return httpx.Response(503, headers={"Retry-After": "7"})
        if request.headers.get("authorization") != f"Bearer {CREDENTIAL}":
            return httpx.Response(401, json={"error": "invalid_client"})
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        if path.endswith("/verify"):
            join = self.joins.pop(form["assertion"], None)  # one use
            if join is None or join.sid not in self.sessions:
                return httpx.Response(400, json={"error": "invalid_assertion", "reason": "session_not_live"})
            token = f"fdbs_{secrets.token_urlsafe(16)}.{secrets.token_urlsafe(32)}"
            self.tokens[token] = join.sid
            return httpx.Response(200, json={"browser_session": token, "return_to": join.return_to,
                                             "state": self._browser_state(join.sid)})
        return httpx.Response(200, json=self._browser_state(self.tokens.get(form["browser_session"], "")))

    def _browser_state(self, sid: str) -> dict[str, Any]:
        state = self.sessions.get(sid)
        if state is None:
            return {"active": False}
        return {"active": True, "client_id": CLIENT_ID, "sub": "usr_1", "sid": sid, "signed_in": state.signed_in,
                "account": state.account, "scope": state.scope}

    def assertion(self, sid: str, return_to: str = f"{PUBLIC_URL}/session") -> str:
        """A browser assertion this fake accepts once for Session ``sid``."""
        value = f"eyJ.{secrets.token_urlsafe(24)}.sig"
        self.joins[value] = Join(sid=sid, return_to=return_to)
        return value


@asynccontextmanager
async def northwind(frontdoor: BrowserFrontdoor) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan, and a browser (its own cookie jar) at the public URL."""
    async with frontdoor.client() as to_frontdoor:
        app = create_app(NorthwindConfig(
            issuer=ISSUER, credential=CREDENTIAL, public_url=PUBLIC_URL, poppy=POPPY, http_client=to_frontdoor,
            clock=lambda: datetime.fromtimestamp(NOW, UTC),
        ))
        async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=PUBLIC_URL) as c:
            yield c


@pytest.fixture
def frontdoor() -> BrowserFrontdoor:
    return BrowserFrontdoor()


def new_session(frontdoor: BrowserFrontdoor, **state: Any) -> str:
    sid = f"ses_{secrets.token_hex(8)}"
    frontdoor.sessions[sid] = SessionState(**state)
    return sid


async def join(browser: httpx.AsyncClient, assertion: str) -> httpx.Response:
    return await browser.post(JOIN, content=f"assertion={assertion}".encode(), headers=FORM)


async def test_a_joined_browser_gets_a_session_cookie_and_is_sent_on(frontdoor: BrowserFrontdoor) -> None:
    sid = new_session(frontdoor)
    async with northwind(frontdoor) as browser:
        r = await join(browser, frontdoor.assertion(sid, f"{PUBLIC_URL}/session?from=agent"))
        assert r.status_code == 303 and r.headers["location"] == f"{PUBLIC_URL}/session?from=agent"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{BROWSER_COOKIE}=fdbs_")
        assert {"Secure", "HttpOnly", "SameSite=Lax", "Path=/"} <= {p.strip() for p in cookie.split(";")}
        assert "max-age" not in cookie.lower() and "expires" not in cookie.lower() and "domain" not in cookie.lower()
        assert r.headers["cache-control"] == "no-store"
        page = await browser.get("/session")
        assert page.status_code == 200 and "signed out" in page.text


async def test_refused_joins_set_no_cookie(frontdoor: BrowserFrontdoor) -> None:
    sid = new_session(frontdoor)
    async with northwind(frontdoor) as browser:
        once = frontdoor.assertion(sid)
        assert (await join(browser, once)).status_code == 303
        browser.cookies.clear()
        for response in (
            await join(browser, once),  # used already
            await join(browser, "not-known"),
            await browser.post(JOIN, json={"assertion": frontdoor.assertion(sid)}),  # not a form
            await browser.post(JOIN, content=b"assertion=a&assertion=b", headers=FORM),
            await browser.post(JOIN, content=b"", headers=FORM),
        ):
            assert response.status_code == 400, response.text
            assert "set-cookie" not in response.headers and "location" not in response.headers
        assert frontdoor.calls == 3  # malformed requests never reach Frontdoor
        assert "not joined" in (await browser.get("/session")).text


async def test_the_page_follows_the_session_and_the_cookie_dies_with_it(frontdoor: BrowserFrontdoor) -> None:
    sid = new_session(frontdoor)
    async with northwind(frontdoor) as browser:
        await join(browser, frontdoor.assertion(sid))
        assert "signed out" in (await browser.get("/session")).text
        frontdoor.sessions[sid] = SessionState(signed_in=True, account="acct_ada", scope="orders:read")
        assert "signed in as Ada Lovelace" in (await browser.get("/session")).text
        frontdoor.sessions[sid] = SessionState()
        assert "signed out" in (await browser.get("/session")).text
        del frontdoor.sessions[sid]  # the Session ended
        ended = await browser.get("/session")
        assert "not joined" in ended.text
        assert ended.headers["set-cookie"].startswith(f"{BROWSER_COOKIE}=;") and "Max-Age=0" in ended.headers["set-cookie"]
        assert BROWSER_COOKIE not in browser.cookies


async def test_pages_fail_closed_when_frontdoor_cannot_answer(frontdoor: BrowserFrontdoor) -> None:
    sid = new_session(frontdoor, signed_in=True, account="acct_ada", scope="orders:read")
    async with northwind(frontdoor) as browser:
        await join(browser, frontdoor.assertion(sid))
        frontdoor.down = True
        page = await browser.get("/session")
        assert page.status_code == 503 and page.headers["retry-after"] == "5" and "Ada" not in page.text
        refused = await join(browser, frontdoor.assertion(sid))
        assert refused.status_code == 503 and "set-cookie" not in refused.headers


