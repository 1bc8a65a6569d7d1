"""Northwind's login page, end to end with Frontdoor's real handoff (PostgreSQL, Redis).

Frontdoor's side is ``frontdoor_tenancy.login_handoff`` for a signed-up tenant whose
``login`` setting points at Northwind; Northwind runs in-process and is reached both by
the "browser" (a cookie-keeping client) and by Frontdoor's SSRF-safe fetcher (its JWKS).
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_protocol.login_handoff import LoginHandoffReason, sign_login_request
from frontdoor_sdk import login_signing_key
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_tenancy.login_handoff import LoginFailureReason, LoginHandoffFailed, finish_login, start_login
from frontdoor_tenancy.signing_keys import jwks
from joserfc.jwk import ECKey
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig, create_app
from northwind.config import DEFAULT_DEMO_PASSWORD
from northwind.login import CSRF_COOKIE

from tests.integration.conftest import TenantHandle
from tests.integration.northwind.fake_frontdoor import CREDENTIAL, PUBLIC_URL

LOGIN_URL = f"{PUBLIC_URL}/login"
JWKS_URI = f"{PUBLIC_URL}/.well-known/jwks.json"
PUBLIC_ISSUER_ORIGIN = "https://issuer.frontdoor.test"
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


class MovableClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Stage:
    """Frontdoor (tenant, db, Redis), Northwind (app, fetcher) and a browser."""

    tenant: TenantHandle
    db: Any
    runtime: Runtime
    kek: Kek
    clock: MovableClock
    browser: httpx.AsyncClient
    fetcher: SafeFetcher

    async def start(self) -> tuple[str, str]:
        url = await start_login(
            self.db, self.kek, self.tenant.id, issuer=self.tenant.issuer,
            return_to=f"{self.tenant.issuer}/login/callback", agent_name="Poppy <Assistant>",
            scopes=["orders:read"], now=self.clock.now, redis=self.runtime.redis,
        )
        return str(url), url.request_jti

    async def finish(self, response: str, request_jti: str, *, now: datetime | None = None) -> str:
        return await finish_login(
            self.db, self.tenant.id, issuer=self.tenant.issuer, response_jwt=response,
            expected_request_jti=request_jti, now=now or self.clock.now, redis=self.runtime.redis,
            fetcher=self.fetcher,
        )

    async def open_login(self, url: str) -> httpx.Response:
        parts = urlsplit(url)
        return await self.browser.get(f"{parts.path}?{parts.query}")

    async def sign_in(self, page: httpx.Response, email: str, password: str) -> httpx.Response:
        fields = dict(HIDDEN.findall(page.text))
        return await self.browser.post("/login", data={
            "request": html.unescape(fields["request"]), "csrf": html.unescape(fields["csrf"]),
            "email": email, "password": password,
        })


def handoff_form(page: httpx.Response) -> tuple[str, str]:
    """The auto-submitting form's action and its ``response`` field."""
    action = re.search(r'<form id="handoff" method="post" action="([^"]+)">', page.text)
    fields = dict(HIDDEN.findall(page.text))
    assert action is not None and "response" in fields, page.text
    return html.unescape(action.group(1)), html.unescape(fields["response"])


async def configure(console: AsyncTestClient[Any], tenant: TenantHandle, login: dict[str, Any]) -> None:
    current = (await console.get("/api/v1/issuer", headers=tenant.auth)).json()["settings"]
    r = await console.put("/api/v1/issuer", json={**current, "login": login}, headers=tenant.auth)
    assert r.status_code == 200, r.text


@asynccontextmanager
async def staged(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, runtime: Runtime,
                 *, login_url: str = LOGIN_URL) -> AsyncIterator[Stage]:
    await configure(console, tenant, {"url": login_url, "jwks_uri": f"{login_url.rsplit('/', 1)[0]}"
                                                                    "/.well-known/jwks.json"})
    clock = MovableClock(runtime.clock())
    issuer_jwks = await jwks(db, tenant.id, clock.now)

    def frontdoor(request: httpx.Request) -> httpx.Response:
        if str(request.url) == f"{tenant.issuer}/jwks.json":
            return httpx.Response(200, json=issuer_jwks)
        return httpx.Response(404)

    async with httpx.AsyncClient(transport=httpx.MockTransport(frontdoor)) as to_frontdoor:
        config = NorthwindConfig(
            issuer=tenant.issuer, credential=CREDENTIAL, public_url=PUBLIC_URL,
            poppy={"auth": {"issuer": tenant.issuer}}, http_client=to_frontdoor, clock=clock,
        )
        app = create_app(config)
        transport = httpx.ASGITransport(app)
        # The login page needs no lifespan (that runs the verifier and the MCP server), and a
        # lifespan's task group cannot span a fixture's setup and teardown.
        async with httpx.AsyncClient(transport=transport, base_url=PUBLIC_URL) as browser:
            yield Stage(tenant=tenant, db=db, runtime=runtime, kek=Kek.from_env_value(runtime.settings.kek),
                        clock=clock, browser=browser, fetcher=SafeFetcher(transport=transport))


@pytest.fixture
async def stage(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, runtime: Runtime
                ) -> AsyncIterator[Stage]:
    async with staged(console, tenant, db, runtime) as s:
        yield s


@pytest.mark.parametrize(("email", "account"), [
    ("ada@northwind.example", "acct_ada"), ("Grace@Northwind.example", "acct_grace"),
])
async def test_a_user_signs_in_at_northwind_and_frontdoor_learns_the_account(
    stage: Stage, email: str, account: str
) -> None:
    url, request_jti = await stage.start()
    page = await stage.open_login(url)
    assert page.status_code == 200
    assert "Poppy &lt;Assistant&gt;" in page.text and "see your orders" in page.text
    done = await stage.sign_in(page, email, DEFAULT_DEMO_PASSWORD)
    assert done.status_code == 200
    action, response = handoff_form(done)
    assert action == f"{stage.tenant.issuer}/login/callback"
    assert await stage.finish(response, request_jti) == account


async def test_the_handoff_page_posts_with_a_visible_button_and_no_inline_script(stage: Stage) -> None:
    url, _ = await stage.start()
    done = await stage.sign_in(await stage.open_login(url), "ada@northwind.example", DEFAULT_DEMO_PASSWORD)
    assert '<button type="submit">Continue</button>' in done.text
    assert re.findall(r"<script[^>]*>", done.text) == ['<script src="/login/continue.js">']
    csp = done.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert f"form-action 'self' {PUBLIC_ISSUER_ORIGIN}" in csp
    assert done.headers["cache-control"] == "no-store"


async def test_a_wrong_password_signs_nobody_in(stage: Stage) -> None:
    url, _ = await stage.start()
    page = await stage.open_login(url)
    answer = await stage.sign_in(page, "ada@northwind.example", "not-the-password")
    assert answer.status_code == 401
    assert "do not match a Northwind account" in answer.text
    assert 'name="response"' not in answer.text


async def test_an_unknown_email_gets_the_same_answer_as_a_wrong_password(stage: Stage) -> None:
    url, _ = await stage.start()
    page = await stage.open_login(url)
    wrong_password = await stage.sign_in(page, "ada@northwind.example", "not-the-password")
    unknown_user = await stage.sign_in(page, "nobody@northwind.example", "not-the-password")
    assert (unknown_user.status_code, unknown_user.text) == (wrong_password.status_code, wrong_password.text)


async def test_a_replayed_response_is_refused(stage: Stage) -> None:
    url, request_jti = await stage.start()
    done = await stage.sign_in(await stage.open_login(url), "ada@northwind.example", DEFAULT_DEMO_PASSWORD)
    _, response = handoff_form(done)
    await stage.finish(response, request_jti)
    with pytest.raises(LoginHandoffFailed) as raised:
        await stage.finish(response, request_jti)
    assert raised.value.reason is LoginFailureReason.REPLAYED


async def test_a_request_for_another_login_page_is_refused_by_northwind(
    console: AsyncTestClient[Any], tenant: TenantHandle, db: Any, runtime: Runtime
) -> None:
    async with staged(console, tenant, db, runtime, login_url="https://other-shop.example/login") as stage:
        url, _ = await stage.start()
        page = await stage.open_login(url)
    assert page.status_code == 400
    assert "cannot be used" in page.text and CSRF_COOKIE not in page.headers.get("set-cookie", "")


async def test_a_response_finished_for_another_audience_is_refused(stage: Stage) -> None:
    url, request_jti = await stage.start()
    done = await stage.sign_in(await stage.open_login(url), "ada@northwind.example", DEFAULT_DEMO_PASSWORD)
    _, response = handoff_form(done)
    with pytest.raises(LoginHandoffFailed) as raised:
        await finish_login(
            stage.db, stage.tenant.id, issuer=f"{stage.tenant.issuer}-other", response_jwt=response,
            expected_request_jti=request_jti, now=stage.clock.now, redis=stage.runtime.redis, fetcher=stage.fetcher,
        )
    assert raised.value.reason is LoginHandoffReason.WRONG_AUDIENCE


async def test_an_expired_request_is_refused_by_northwind(stage: Stage) -> None:
    url, _ = await stage.start()
    stage.clock.now += timedelta(seconds=151)
    page = await stage.open_login(url)
    assert page.status_code == 400 and "expired" in page.text


async def test_a_request_that_expires_while_the_user_types_is_refused_at_submit(stage: Stage) -> None:
    url, _ = await stage.start()
    page = await stage.open_login(url)
    stage.clock.now += timedelta(seconds=151)
    answer = await stage.sign_in(page, "ada@northwind.example", DEFAULT_DEMO_PASSWORD)
    assert answer.status_code == 400 and 'name="response"' not in answer.text


async def test_an_expired_response_is_refused_by_frontdoor(stage: Stage) -> None:
    url, request_jti = await stage.start()
    done = await stage.sign_in(await stage.open_login(url), "ada@northwind.example", DEFAULT_DEMO_PASSWORD)
    _, response = handoff_form(done)
    with pytest.raises(LoginHandoffFailed) as raised:
        await stage.finish(response, request_jti, now=stage.clock.now + timedelta(seconds=91))
    assert raised.value.reason is LoginHandoffReason.EXPIRED


async def test_a_forged_request_jwt_is_refused(stage: Stage) -> None:
    url, _ = await stage.start()
    (token,) = parse_qs(urlsplit(url).query)["request"]
    header, payload = (json.loads(base64.urlsafe_b64decode(part + "==")) for part in token.split(".")[:2])
    # The same claims and kid, signed by a key the issuer never published.
    forger = ECKey.import_key({**login_signing_key().as_dict(private=True), "kid": header["kid"]})
    page = await stage.browser.get("/login", params={"request": sign_login_request(payload, forger, header["kid"])})
    assert page.status_code == 400
    assert 'name="password"' not in page.text


async def test_a_post_without_the_csrf_cookie_is_refused(stage: Stage) -> None:
    url, _ = await stage.start()
    page = await stage.open_login(url)
    stage.browser.cookies.clear()
    answer = await stage.sign_in(page, "ada@northwind.example", DEFAULT_DEMO_PASSWORD)
    assert answer.status_code == 403 and 'name="response"' not in answer.text


async def test_the_login_page_cannot_be_framed(stage: Stage) -> None:
    url, _ = await stage.start()
    page = await stage.open_login(url)
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "httponly" in page.headers["set-cookie"].lower() and "samesite=strict" in page.headers["set-cookie"].lower()


async def test_the_login_page_without_a_request_explains_where_to_start(stage: Stage) -> None:
    page = await stage.browser.get("/login")
    assert page.status_code == 400 and "start signing in again" in page.text


async def test_northwind_publishes_only_public_key_members(stage: Stage) -> None:
    published = (await stage.browser.get("/.well-known/jwks.json")).json()
    assert [set(key) for key in published["keys"]] == [{"kty", "crv", "x", "y", "kid", "use", "alg"}]
