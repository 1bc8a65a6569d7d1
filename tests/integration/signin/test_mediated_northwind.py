"""Mediated Sign-In end to end, in-process: agent → Frontdoor's issuer → Northwind's relay.

A dedicated issuer app is built here, its SSRF-safe fetcher routed to the Northwind app
for ``northwind.example`` (and to the shared `MockWeb` for the agents' metadata); both
apps run their lifespans in the test's own task, called through ``httpx.ASGITransport``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import httpx
import pytest
import structlog
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.settings import Settings
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig, create_app

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_log_redaction import capture_logs
from tests.integration.signin.conftest import Company, make_company, new_agent
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

NORTHWIND = "https://northwind.example"
RELAY_URL = f"{NORTHWIND}/poppy/mediated-relay"
PASSWORD = "northwind-" + secrets.token_urlsafe(12)
FIELDS = [{"name": "email", "label": "Email", "secret": False},
          {"name": "password", "label": "Password", "secret": True}]


class _Internet(httpx.AsyncBaseTransport):
    """The issuer's outbound network: Northwind in-process, everything else the MockWeb."""

    def __init__(self, web: MockWeb) -> None:
        self.web = web
        self.northwind: httpx.AsyncBaseTransport | None = None
        self.relayed: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "northwind.example" and self.northwind is not None:
            self.relayed.append(request.content)
            return await self.northwind.handle_async_request(request)
        return await self.web.handle_async_request(request)


@dataclass
class Stage:
    company: Company
    web: MockWeb
    internet: _Internet

    async def mediated(self, agent: TestAgent, token: str, email: str, password: str) -> httpx.Response:
        c = self.company
        url = f"{c.tenant.issuer}/oauth/mediated"
        body = {"scope": "poppy:read", "credentials": {"email": email, "password": password}}
        return cast("httpx.Response", await c.issuer.post(f"/{c.tenant.slug}/oauth/mediated", content=json.dumps(body),
                                                          headers={"Content-Type": "application/json",
                                                                   "Authorization": f"DPoP {token}",
                                                                   "DPoP": agent.dpop("POST", url, token=token,
                                                                                      iat=c.now())}))


Staging = Callable[[], AbstractAsyncContextManager[Stage]]


@pytest.fixture
def staged(settings: Settings, console: AsyncTestClient[Any], tenant: TenantHandle, clock: ShiftableClock,
           runtime: Any, web: MockWeb) -> Staging:
    """Enter it in the test itself: the apps' lifespans must start and end in one task."""
    return lambda: _stage(settings, console, tenant, clock, runtime, web)


@asynccontextmanager
async def _stage(settings: Settings, console: AsyncTestClient[Any], tenant: TenantHandle, clock: ShiftableClock,
                 runtime: Any, web: MockWeb) -> AsyncIterator[Stage]:
    from frontdoor_issuer.app import create_app as issuer_app

    internet = _Internet(web)
    issuer = issuer_app(settings, clock=clock, fetcher=SafeFetcher(transport=internet))
    async with issuer.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app=issuer),
                                                    base_url="https://issuer.frontdoor.test") as to_issuer:
        company = await make_company(console, cast("Any", to_issuer), tenant, clock,
                                     DeviceStore(runtime.redis, clock=clock),
                                     mediated={"enabled": True, "scopes": ["poppy:read"], "relay_url": RELAY_URL,
                                               "fields": FIELDS})
        northwind = create_app(NorthwindConfig(
            issuer=tenant.issuer, credential=company.credential, public_url=NORTHWIND,
            poppy={"auth": {"issuer": tenant.issuer}}, http_client=to_issuer, clock=clock, demo_password=PASSWORD))
        async with northwind.lifespan():
            internet.northwind = httpx.ASGITransport(app=northwind)
            yield Stage(company=company, web=web, internet=internet)


async def test_an_agent_signs_in_with_northwind_credentials(staged: Staging) -> None:
    async with staged() as stage:
        agent = new_agent(stage.web)
        s = await stage.company.session(agent, "u1")
        r = await stage.mediated(agent, s["access_token"], "ada@northwind.example", PASSWORD)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "complete" and body["signed_in"] is True and body["session_id"] == s["session_id"]
        assert body["refresh_token"] and PASSWORD not in r.text
        state = await stage.company.introspect(body["access_token"])
        assert state["active"] is True and state["signed_in"] is True and state.get("account", "acct_ada") == "acct_ada"
        assert len(stage.internet.relayed) == 1 and stage.internet.relayed[0].count(b".") == 2  # one signed JWT


async def test_a_wrong_password_and_an_unknown_email_both_fail(staged: Staging) -> None:
    async with staged() as stage:
        agent = new_agent(stage.web)
        s = await stage.company.session(agent, "u2")
        wrong = await stage.mediated(agent, s["access_token"], "ada@northwind.example", PASSWORD + "x")
        unknown = await stage.mediated(agent, s["access_token"], "nobody@northwind.example", PASSWORD)
        assert wrong.status_code == unknown.status_code == 200
        assert wrong.json() == unknown.json() == {"status": "failed"}
        assert (await stage.company.introspect(s["access_token"]))["signed_in"] is False


async def test_northwind_refuses_a_replayed_or_forged_relay_request(staged: Staging) -> None:
    async with staged() as stage:
        agent = new_agent(stage.web)
        s = await stage.company.session(agent, "u3")
        await stage.mediated(agent, s["access_token"], "grace@northwind.example", PASSWORD)
        assert stage.internet.northwind is not None
        async with httpx.AsyncClient(transport=stage.internet.northwind, base_url=NORTHWIND) as direct:
            replayed = await direct.post("/poppy/mediated-relay", content=stage.internet.relayed[-1],
                                         headers={"Content-Type": "application/jwt"})
            forged = await direct.post("/poppy/mediated-relay", content=b"e30.e30.", headers={
                "Content-Type": "application/jwt"})
        assert replayed.status_code == forged.status_code == 400
        assert "complete" not in replayed.text


async def test_no_secret_reaches_the_logs(staged: Staging, capfd: pytest.CaptureFixture[str]) -> None:
    async with staged() as stage:
        agent = new_agent(stage.web)
        with capture_logs() as buf:
            s = await stage.company.session(agent, "u4")
            await stage.mediated(agent, s["access_token"], "ada@northwind.example", PASSWORD + "-wrong")
            done = await stage.mediated(agent, s["access_token"], "ada@northwind.example", PASSWORD)
            structlog.get_logger("frontdoor.test").warning("mediated_probe")
        assert done.json()["status"] == "complete"
        captured = capfd.readouterr()
        text = "\n".join([buf.getvalue(), captured.out, captured.err])
        assert "mediated_probe" in text
        for secret in (PASSWORD, done.json()["refresh_token"], s["access_token"]):
            assert secret not in text
