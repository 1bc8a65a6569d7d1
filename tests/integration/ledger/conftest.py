"""The ledger on the wire: a company (API credential, perform webhook) and agents (DPoP
Session Tokens from the real issuer) against the real ledger app, PostgreSQL and Redis.

The company's perform webhook is a `Receiver` on the pretend internet: it checks every
delivery's Standard Webhooks signature with the independent `standardwebhooks` package,
performs once per idempotency key, and answers as each test tells it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient
from standardwebhooks.webhooks import Webhook

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.signin.conftest import SCOPES, Company, make_company
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

LEDGER = "https://ledger.frontdoor.test"
OPERATIONS = {"operations": {"version": "1"}}


@pytest.fixture(scope="session")
async def ledger(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                 ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url=LEDGER) as client:
        yield client


@dataclass
class Receiver:
    """The company's perform webhook: verifies, performs once per key, answers as told."""

    secret: str
    answer: str = "succeeded"  # succeeded | failed | accepted | error | garbage | slow
    performed: dict[str, int] = field(default_factory=dict)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    webhook_ids: list[str] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        payload = Webhook(self.secret).verify(request.content, dict(request.headers))
        self.webhook_ids.append(request.headers["webhook-id"])
        self.deliveries.append(payload)
        if payload["type"] != "operation.perform":
            return httpx.Response(204)
        key = payload["data"]["idempotency_key"]
        if self.answer == "error":
            return httpx.Response(503, json={"error": "down"})
        if self.answer == "garbage":
            return httpx.Response(200, content=b"ok")
        if self.answer == "slow":
            await asyncio.sleep(0.5)
        if key not in self.answers:
            self.performed[key] = self.performed.get(key, 0) + 1
            if self.answer == "accepted":
                self.answers[key] = {}
            elif self.answer == "failed":
                self.answers[key] = {"outcome": "failed",
                                     "result": {"summary": "Charged nothing: the item sold out after confirmation"}}
            else:
                self.answers[key] = {"outcome": "succeeded", "result": {
                    "summary": f"Order {len(self.performed)} placed", "data": {"order": len(self.performed)}}}
        body = self.answers[key]
        return httpx.Response(202 if not body else 200, json=body)


@dataclass
class Shop:
    """A tenant with an operation kind, its webhook, and the agents' view of the ledger."""

    company: Company
    ledger: AsyncTestClient[Any]
    console: AsyncTestClient[Any]
    receiver: Receiver
    endpoint_id: str
    kind: str = "order.place"

    @property
    def tenant(self) -> TenantHandle:
        return self.company.tenant

    @property
    def api(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.company.credential}"}

    def now(self) -> int:
        return self.company.now()

    async def propose(self, session: dict[str, Any], agent: TestAgent, user: str, **over: Any) -> httpx.Response:
        body = {"kind": self.kind, "caller": {"session_id": session["session_id"], "client_id": agent.client_id,
                                              "user_id": user},
                "summary": "Order 2 x espresso beans (1 kg) for 38.00 EUR, delivered Friday",
                "terms": {"total": {"amount": "38.00", "currency": "EUR"}, "items": [{"sku": "esp-1kg", "qty": 2}]},
                "user_approval_required": True, "input": {"cart": "c-1"}}
        body.update(over)
        return await self.ledger.post(f"/{self.tenant.slug}/v1/operations", json=body, headers=self.api)

    def url(self, operation_id: str, action: str = "") -> str:
        return f"{LEDGER}/{self.tenant.slug}/operations/{operation_id}" + (f"/{action}" if action else "")

    async def agent(self, agent: TestAgent, token: str, operation_id: str, action: str = "",
                    body: Any = None) -> httpx.Response:
        method = "GET" if not action else "POST"
        url = self.url(operation_id, action)
        headers = {"Authorization": f"DPoP {token}", "DPoP": agent.dpop(method, url, token=token, iat=self.now())}
        if method == "GET":
            return await self.ledger.get(url, headers=headers)
        return await self.ledger.post(url, content=json.dumps(body if body is not None else {}).encode(),
                                      headers={**headers, "Content-Type": "application/json"})

    async def confirm(self, agent: TestAgent, token: str, operation: dict[str, Any],
                      approved_by: str = "user", revision: int | None = None) -> httpx.Response:
        return await self.agent(agent, token, operation["operation_id"], "confirm",
                                {"revision": revision or operation["revision"], "approved_by": approved_by})


def operations_agent(web: MockWeb, *, extensions: dict[str, Any] | None = None) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example", extensions=OPERATIONS if extensions is None else extensions
                     ).publish(web)


@pytest.fixture
def store(runtime: Any, clock: ShiftableClock) -> Any:
    from frontdoor_sessions import DeviceStore

    return DeviceStore(runtime.redis, clock=clock)


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return operations_agent(web)


async def make_shop(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],
                    t: TenantHandle, clock: ShiftableClock, store: Any, web: MockWeb, *,
                    scopes: list[str] | None = None, **settings: Any) -> Shop:
    company = await make_company(console, issuer, t, clock, store, **settings)
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
    return Shop(company=company, ledger=ledger, console=console, receiver=receiver,
                endpoint_id=created["endpoint"]["id"])


@pytest.fixture
async def shop(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],
               tenant: TenantHandle, clock: ShiftableClock, store: Any, web: MockWeb) -> Shop:
    return await make_shop(console, issuer, ledger, tenant, clock, store, web)


__all__ = ["SCOPES", "Receiver", "Shop", "make_shop", "operations_agent"]
