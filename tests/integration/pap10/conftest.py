"""PAP 1.0 on the wire: the independent agent (tests/support/pap10_agent.py) against the real
issuer, ledger and console apps on the worker's PostgreSQL and Redis.

The agent publishes its CIMD and JWKS on the pretend internet (`MockWeb`) that Frontdoor's
SSRF-safe fetcher sees; every request it makes carries a fresh ``Poppy-Session`` JWT built
by the agent alone, at the apps' (shiftable) clock. The company is a tenant serving 0.2
and 1.0 (the default for new tenants, ADR 0004 §1) with the operation kind
``order.place`` and a perform webhook (`Receiver`, shared with tests/integration/ledger).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER, Receiver
from tests.integration.signin.conftest import configure, resource_credential
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Knobs, Pap10Agent, Session

SCOPES = ["poppy:read", "poppy:write"]


@pytest.fixture(scope="session")
async def ledger(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                 ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url=LEDGER) as client:
        yield client


def new_agent(web: MockWeb, clock: ShiftableClock, **options: Any) -> Pap10Agent:
    """A 1.0 agent on its own host, its documents published, signing at the apps' clock."""
    agent = Pap10Agent(origin=f"https://{unique('agent-')}.example", clock=lambda: int(clock().timestamp()),
                       **options)
    return agent.publish(web)


@dataclass
class Shop1:
    """A tenant serving 1.0 with an operation kind, seen by a 1.0 agent at the ledger."""

    tenant: TenantHandle
    ledger: AsyncTestClient[Any]
    console: AsyncTestClient[Any]
    issuer: AsyncTestClient[Any]
    receiver: Receiver
    credential: str
    clock: ShiftableClock
    kind: str = "order.place"

    @property
    def api(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.credential}"}

    def url(self, operation_id: str, action: str = "") -> str:
        return f"{LEDGER}/{self.tenant.slug}/operations/{operation_id}" + (f"/{action}" if action else "")

    async def request(self, agent: Pap10Agent, session: Session, method: str, url: str, *, body: Any = None,
                      signed_in: bool = True, knobs: Knobs | None = None) -> httpx.Response:
        """One request to the ledger, signed by ``agent`` with a fresh Session JWT (no recovery)."""
        r, _ = await agent.call(self.ledger, method, url, session, aud=self.tenant.issuer, json_body=body,
                                signed_in=signed_in, knobs=knobs, recover=False)
        return r

    async def read(self, agent: Pap10Agent, session: Session, operation_id: str, **kw: Any) -> httpx.Response:
        return await self.request(agent, session, "GET", self.url(operation_id), **kw)

    async def confirm(self, agent: Pap10Agent, session: Session, operation: dict[str, Any], **kw: Any
                      ) -> httpx.Response:
        return await self.request(agent, session, "POST", self.url(operation["operation_id"], "confirm"),
                                  body={"revision": operation["revision"], "approved_by": "user"}, **kw)

    async def session_id(self, db: Any, agent: Pap10Agent, session: Session) -> str:
        """Frontdoor's ``ses_`` ID of the agent's Session (what the sdk's caller carries)."""
        row = await db.fetchrow("SELECT id FROM pap_sessions WHERE tenant_id = $1 AND client_id = $2"
                                " AND agent_sid = $3 AND profile = '1.0'", self.tenant.id, agent.client_id,
                                session.sid)
        assert row is not None, "the Session was never seen"
        return str(row["id"])

    async def propose(self, caller_session_id: str, agent: Pap10Agent, session: Session, *,
                      account: str | None = None, **over: Any) -> httpx.Response:
        """The company proposes for the 1.0 caller it verified (ADR 0004 §9)."""
        caller: dict[str, Any] = {"session_id": caller_session_id, "client_id": agent.client_id,
                                  "user_id": session.sub}
        if account is not None:
            caller["account"] = account
        body = {"kind": self.kind, "caller": caller,
                "summary": "Order 2 x espresso beans (1 kg) for 38.00 EUR, delivered Friday",
                "terms": {"total": {"amount": "38.00", "currency": "EUR"}, "items": [{"sku": "esp-1kg", "qty": 2}]},
                "user_approval_required": True, "input": {"cart": "c-1"}}
        body.update(over)
        return await self.ledger.post(f"/{self.tenant.slug}/v1/operations", json=body, headers=self.api)

    async def seen(self, db: Any, agent: Pap10Agent, session: Session) -> str:
        """Make the ledger see the Session (a read of an unknown operation), return its ``ses_`` ID."""
        r = await self.read(agent, session, "op_" + "0" * 26)
        assert r.status_code == 404, r.text
        return await self.session_id(db, agent, session)

    async def operation(self, db: Any, agent: Pap10Agent, session: Session, *, account: str | None = None
                        ) -> dict[str, Any]:
        sid = await self.seen(db, agent, session)
        r = await self.propose(sid, agent, session, account=account)
        assert r.status_code == 201, r.text
        return dict(r.json()["operation"])


async def make_shop(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],
                    t: TenantHandle, clock: ShiftableClock, web: MockWeb, *, scopes: list[str] | None = None) -> Shop1:
    await configure(console, t, device={"enabled": True, "scopes": SCOPES})
    credential = await resource_credential(console, t)
    hook = f"https://{t.slug}.shop.example/webhooks/frontdoor"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook, "description": "perform"}, headers=t.auth)
    assert r.status_code == 201, r.text
    created = r.json()
    receiver = Receiver(secret=created["secret"])
    web.handle(hook, receiver)
    r = await console.put("/api/v1/operation-kinds/order.place", headers=t.auth, json={
        "perform_endpoint_id": created["endpoint"]["id"], "scopes": scopes if scopes is not None else ["poppy:write"],
        "default_expiry_seconds": 900, "max_expiry_seconds": 3600, "description": "Place an order"})
    assert r.status_code == 200, r.text
    return Shop1(tenant=t, ledger=ledger, console=console, issuer=issuer, receiver=receiver, credential=credential,
                 clock=clock)


@pytest.fixture
async def shop(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],
               tenant: TenantHandle, clock: ShiftableClock, web: MockWeb) -> Shop1:
    return await make_shop(console, issuer, ledger, tenant, clock, web)


@pytest.fixture
def agent(web: MockWeb, clock: ShiftableClock) -> Pap10Agent:
    return new_agent(web, clock)


@pytest.fixture
def user() -> Session:
    return Session(sub=unique("user-"))


__all__ = ["SCOPES", "Shop1", "make_shop", "new_agent"]


class Network(httpx.AsyncBaseTransport):
    """The agent's internet: each host is one of the real apps (a test client) or the pretend web."""

    def __init__(self, hosts: dict[str, Any], web: MockWeb) -> None:
        self.hosts = hosts
        self.web = web

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        app = self.hosts.get(request.url.host or "")
        if app is None:
            return await self.web.handle_async_request(request)
        body = await request.aread()
        r = await app.request(request.method, str(request.url), headers=list(request.headers.multi_items()),
                              content=body)
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)


def agent_http(shop: Shop1, web: MockWeb) -> httpx.AsyncClient:
    """An httpx client the agent uses: issuer and ledger are the real apps, everything else the pretend web."""
    hosts = {"issuer.frontdoor.test": shop.issuer, "ledger.frontdoor.test": shop.ledger}
    return httpx.AsyncClient(transport=Network(hosts, web))


async def publish_company(shop: Shop1, web: MockWeb, dns: Any, *, published: str = "1.0") -> str:
    """A verified domain serving the console's generated poppy.json and protected-resource metadata."""
    from tests.integration.test_issuer_discovery import verified_domain

    if published != "0.2":
        await configure(shop.console, shop.tenant, protocol={"served": ["0.2", "1.0"], "published": published})
    domain = await verified_domain(shop.console, shop.tenant, dns)
    for name, path in (("poppy.json", "/.well-known/poppy.json"),
                       ("oauth-protected-resource", "/.well-known/oauth-protected-resource")):
        r = await shop.console.get(f"/api/v1/domains/{domain}/{name}", headers=shop.tenant.auth)
        assert r.status_code == 200, r.text
        web.serve(f"https://{domain}{path}", json=r.json())
    return domain


@pytest.fixture
def store(runtime: Any, clock: ShiftableClock) -> Any:
    from frontdoor_sessions import DeviceStore

    return DeviceStore(runtime.redis, clock=clock)


async def sign_in(shop: Shop1, agent: Pap10Agent, web: MockWeb, store: Any, account: str, *,
                  scope: str = "poppy:read poppy:write", granted: str | None = None) -> httpx.Response:
    """Device Sign-In without a Session [S §5]: the user approves (through the store), the agent polls."""
    from tests.support.pap10_agent import Discovery

    meta = (await shop.issuer.get(f"/.well-known/oauth-authorization-server/{shop.tenant.slug}")).json()
    found = Discovery(domain="", poppy={}, resource_metadata={}, issuer_metadata=meta)
    async with agent_http(shop, web) as http:
        started = await agent.start_device(http, found, scope)
        pending = await store.find_by_user_code(shop.tenant.id, started["user_code"])
        assert pending is not None
        assert await store.approve(shop.tenant.id, pending.handle, account, granted or scope)
        return await agent.poll_device(http, found, started["device_code"])


def discovery_of(meta: dict[str, Any]) -> Any:
    from tests.support.pap10_agent import Discovery

    return Discovery(domain="", poppy={}, resource_metadata={}, issuer_metadata=meta)
