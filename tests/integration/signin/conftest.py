"""Sign-in on the wire: an agent (TestAgent) against the issuer, the user played by
approving through `DeviceStore` directly (the device pages are tested elsewhere).

Every assertion and proof is made at the app's (shiftable) clock, so a test can move
time past an interval or an expiry and still authenticate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import CLIENT_ASSERTION_TYPE, JWT_BEARER, TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
SCOPES = ["poppy:read", "poppy:write"]


async def configure(console: AsyncTestClient[Any], t: TenantHandle, **changes: Any) -> None:
    """Change the tenant's issuer settings (before the issuer first sees the tenant: it caches them)."""
    current = (await console.get("/api/v1/issuer", headers=t.auth)).json()["settings"]
    current.update(changes)
    r = await console.put("/api/v1/issuer", json=current, headers=t.auth)
    assert r.status_code == 200, r.text


async def resource_credential(console: AsyncTestClient[Any], t: TenantHandle) -> str:
    r = await console.post("/api/v1/resource-credentials", json={"name": "account-pages"}, headers=t.auth)
    assert r.status_code == 201, r.text
    return str(r.json()["secret"])


@dataclass
class Company:
    """One tenant as its agents and its resource servers see it."""

    issuer: AsyncTestClient[Any]
    tenant: TenantHandle
    clock: ShiftableClock
    store: DeviceStore
    credential: str

    @property
    def token_url(self) -> str:
        return f"{self.tenant.issuer}/oauth/token"

    def now(self) -> int:
        return int(self.clock().timestamp())

    def client_form(self, agent: TestAgent) -> dict[str, str]:
        now = self.now()
        return {"client_id": agent.client_id, "client_assertion_type": CLIENT_ASSERTION_TYPE,
                "client_assertion": agent.client_assertion(self.tenant.issuer, iat=now, exp=now + 60)}

    def proof(self, agent: TestAgent, url: str | None = None) -> dict[str, str]:
        return {"DPoP": agent.dpop("POST", url or self.token_url, iat=self.now())}

    async def post_token(self, agent: TestAgent, form: dict[str, str], *, dpop: bool = True) -> Any:
        return await self.issuer.post(f"/{self.tenant.slug}/oauth/token", data={**self.client_form(agent), **form},
                                      headers=self.proof(agent) if dpop else {})

    async def session(self, agent: TestAgent, user: str, session_id: str | None = None) -> dict[str, Any]:
        now = self.now()
        form = {"grant_type": JWT_BEARER,
                "assertion": agent.session_assertion(self.tenant.issuer, user, iat=now, exp=now + 120)}
        if session_id:
            form["session_id"] = session_id
        r = await self.post_token(agent, form)
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def device(self, agent: TestAgent, scope: str = "poppy:read poppy:write") -> Any:
        return await self.issuer.post(f"/{self.tenant.slug}/oauth/device",
                                      data={**self.client_form(agent), "scope": scope})

    async def poll(self, agent: TestAgent, device_code: str, session_id: str) -> Any:
        return await self.post_token(agent, {"grant_type": DEVICE_CODE, "device_code": device_code,
                                             "session_id": session_id})

    async def approve(self, user_code: str, account: str, granted: str = "poppy:read poppy:write") -> None:
        found = await self.store.find_by_user_code(self.tenant.id, user_code)
        assert found is not None
        assert await self.store.approve(self.tenant.id, found.handle, account, granted)

    async def sign_in(self, agent: TestAgent, user: str, account: str, *, session_id: str | None = None,
                      scope: str = "poppy:read poppy:write", granted: str | None = None) -> dict[str, Any]:
        """Device Sign-In end to end; returns the token response (Session Token and Account Token)."""
        sid = session_id or (await self.session(agent, user))["session_id"]
        started = (await self.device(agent, scope)).json()
        await self.approve(started["user_code"], account, granted or scope)
        r = await self.poll(agent, started["device_code"], sid)
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def refresh(self, agent: TestAgent, token: str, *, session_id: str | None = None,
                      scope: str | None = None, client: TestAgent | None = None) -> Any:
        form = {"grant_type": "refresh_token", "refresh_token": token}
        if session_id:
            form["session_id"] = session_id
        if scope:
            form["scope"] = scope
        return await self.post_token(client or agent, form)

    async def revoke(self, agent: TestAgent, token: str) -> Any:
        return await self.issuer.post(f"/{self.tenant.slug}/oauth/revoke",
                                      data={**self.client_form(agent), "token": token,
                                            "token_type_hint": "refresh_token"})

    async def introspect(self, token: str) -> dict[str, Any]:
        r = await self.issuer.post(f"/{self.tenant.slug}/oauth/introspect", data={"token": token},
                                   headers={"Authorization": f"Bearer {self.credential}"})
        assert r.status_code == 200, r.text
        return dict(r.json())


def new_agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return new_agent(web)


@pytest.fixture
def store(runtime: Runtime, clock: ShiftableClock) -> DeviceStore:
    return DeviceStore(runtime.redis, clock=clock)


async def make_company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle,
                       clock: ShiftableClock, store: DeviceStore, **settings: Any) -> Company:
    await configure(console, t, device={"enabled": True, "scopes": SCOPES}, **settings)
    return Company(issuer=issuer, tenant=t, clock=clock, store=store, credential=await resource_credential(console, t))


@pytest.fixture
async def company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
                  clock: ShiftableClock, store: DeviceStore) -> Company:
    return await make_company(console, issuer, tenant, clock, store)


@pytest.fixture
async def other_company(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], other_tenant: TenantHandle,
                        clock: ShiftableClock, store: DeviceStore) -> Company:
    return await make_company(console, issuer, other_tenant, clock, store)


def assert_problem(r: Any, status: int, code: str) -> None:
    """A company API's refusal (the issuer's account routes): RFC 9457 problem details."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers["content-type"]
    body = r.json()
    assert (body["status"], body["code"], body["type"]) == (status, code, f"https://frontdoor.dev/problems/{code}")
    assert body["title"] and body["detail"] and "error" not in body
    assert r.headers["cache-control"] == "no-store"
    assert "fdat_" not in r.text and "fdrs_" not in r.text and "eyJ" not in r.text


def assert_refusal(r: Any, status: int, error: str) -> None:
    """A refusal per the catalogue: status, error, no-store, and no credential echoed."""
    assert r.status_code == status, r.text
    assert r.json()["error"] == error, r.text
    assert r.headers["cache-control"] == "no-store"
    assert "fdat_" not in r.text and "eyJ" not in r.text


@pytest.fixture(scope="session")
async def lean(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
               ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The issuer as ``asgi.py`` serves it: the lean routes (introspection, token) in front of Litestar."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_httpkit import lean_route_observer
    from frontdoor_issuer.app import create_app
    from frontdoor_issuer.http.lean_routes import LeanRoutes

    app = LeanRoutes(create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web)),
                     max_body_bytes=settings.max_body_bytes, hsts=False, observe=lean_route_observer("issuer"))
    async with AsyncTestClient(app, base_url="https://issuer.frontdoor.test") as client:  # type: ignore[arg-type]
        yield client
