"""PAP 1.0 at a company on Frontdoor's sdk: Northwind in process, with the real issuer and
ledger apps, and the independent agent (ADR 0004 §6, §7, §9).

Northwind verifies the ``Poppy-Session`` header with the sdk (which asks the issuer's
``/poppy/agent-keys`` and ``/poppy/session-state``), proposes through the sdk's ledger
client, and performs on the ledger's signed webhook.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER
from tests.integration.pap10.conftest import Network, discovery_of, new_agent
from tests.integration.pap10.test_pap10_session_header import assert_invalid_session
from tests.integration.signin.conftest import configure, resource_credential
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Knobs, Pap10Agent, Session

PASSWORD = "pap10-northwind-password"


@dataclass
class Company:
    origin: str
    tenant: TenantHandle
    http: httpx.AsyncClient
    issuer: AsyncTestClient[Any]
    ledger: AsyncTestClient[Any]


@pytest.fixture
async def northwind(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], ledger: AsyncTestClient[Any],
                    tenant: TenantHandle, clock: ShiftableClock, web: MockWeb, dns: LocalDNS
                    ) -> AsyncIterator[Company]:
    from northwind import NorthwindConfig, create_app

    scopes = ["orders:read"]
    await configure(console, tenant, custom_scopes={"orders:read": "See your orders"},
                    device={"enabled": True, "scopes": scopes})
    credential = await resource_credential(console, tenant)
    domain = await verified_domain(console, tenant, dns)
    origin = f"https://{domain}"
    hook = f"{origin}/webhooks/frontdoor"
    r = await console.post("/api/v1/webhook-endpoints", json={"url": hook, "description": "perform"},
                           headers=tenant.auth)
    assert r.status_code == 201, r.text
    created = r.json()
    r = await console.put("/api/v1/operation-kinds/order.place", headers=tenant.auth, json={
        "perform_endpoint_id": created["endpoint"]["id"], "scopes": scopes,
        "default_expiry_seconds": 900, "max_expiry_seconds": 3600, "description": "Place an order"})
    assert r.status_code == 200, r.text
    poppy = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    frontdoor = httpx.AsyncClient(transport=Network({"issuer.frontdoor.test": issuer,
                                                     "ledger.frontdoor.test": ledger}, web))
    app = create_app(NorthwindConfig(issuer=tenant.issuer, credential=credential, public_url=origin, poppy=poppy,
                                     http_client=frontdoor, clock=clock, demo_password=PASSWORD,
                                     ledger_url=f"{LEDGER}/{tenant.slug}", webhook_secret=created["secret"]))
    async with AsyncTestClient(app, base_url=origin) as company:
        async def perform(request: httpx.Request) -> httpx.Response:  # the ledger's webhook reaches Northwind
            answer = await company.post(request.url.path, content=request.content,
                                        headers=list(request.headers.multi_items()))
            return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

        web.handle(hook, perform)
        hosts = {"issuer.frontdoor.test": issuer, "ledger.frontdoor.test": ledger, domain: company}
        async with httpx.AsyncClient(transport=Network(hosts, web)) as http:
            yield Company(origin=origin, tenant=tenant, http=http, issuer=issuer, ledger=ledger)
    await frontdoor.aclose()


async def device_sign_in(c: Company, agent: Pap10Agent, store: Any, account: str) -> None:
    meta = (await c.issuer.get(f"/.well-known/oauth-authorization-server/{c.tenant.slug}")).json()
    found = discovery_of(meta)
    started = await agent.start_device(c.http, found, "orders:read")
    pending = await store.find_by_user_code(c.tenant.id, started["user_code"])
    assert await store.approve(c.tenant.id, pending.handle, account, "orders:read")
    r = await agent.poll_device(c.http, found, started["device_code"])
    assert r.status_code == 200, r.text


async def test_signed_out_then_signed_in_then_a_confirmed_reorder(northwind: Company, web: MockWeb,
                                                                  clock: ShiftableClock, store: Any) -> None:
    c = northwind
    agent = new_agent(web, clock)
    user = Session(sub="northwind-user")
    orders = f"{c.origin}/api/orders"
    # ADR 0004 §7 [Q4]: a route needing the account, signed out: 401 Bearer with resource_metadata.
    r, user = await agent.call(c.http, "GET", orders, user, aud=c.tenant.issuer)
    assert r.status_code == 401 and r.json()["error"] == "sign_in_required", r.text
    assert f'resource_metadata="{c.origin}/.well-known/oauth-protected-resource"' in r.headers["www-authenticate"]
    await device_sign_in(c, agent, store, "acct_ada")
    r, user = await agent.call(c.http, "GET", orders, user, aud=c.tenant.issuer)
    assert r.status_code == 200, r.text
    r, user = await agent.call(c.http, "POST", f"{c.origin}/api/orders/reorder", user, aud=c.tenant.issuer,
                               json_body={})
    assert r.status_code == 202, r.text
    op = r.json()["operation"]
    url = f"{LEDGER}/{c.tenant.slug}/operations/{op['operation_id']}"
    r, user = await agent.call(c.http, "POST", f"{url}/confirm", user, aud=c.tenant.issuer,
                               json_body={"revision": op["revision"], "approved_by": "user"})
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text


async def test_a_malformed_header_at_the_company_is_invalid_session(northwind: Company, web: MockWeb,
                                                                    clock: ShiftableClock) -> None:
    # [S §4] at the company too: 400 invalid_session, no challenge, nothing echoed.
    agent = new_agent(web, clock)
    user = Session(sub="northwind-user")
    r, _ = await agent.call(northwind.http, "GET", f"{northwind.origin}/api/orders", user,
                            aud=northwind.tenant.issuer, knobs=Knobs(claims={"aud": "https://elsewhere.example"}))
    assert_invalid_session(r)


async def test_an_ended_session_at_the_company_and_the_agents_recovery(northwind: Company, web: MockWeb,
                                                                       clock: ShiftableClock,
                                                                       console: AsyncTestClient[Any]) -> None:
    # [S §4] session_ended, a new sid, one retry (the Session ended when the company blocked the agent).
    c = northwind
    agent = new_agent(web, clock)
    user = Session(sub="northwind-user")
    orders = f"{c.origin}/api/orders"
    r, user = await agent.call(c.http, "GET", orders, user, aud=c.tenant.issuer)
    assert r.status_code == 401
    for action in ("block", "unblock"):
        assert (await console.post(f"/api/v1/agents/{action}", json={"client_id": agent.client_id},
                                   headers=c.tenant.auth)).status_code == 200
    ended, _ = await agent.call(c.http, "GET", orders, user, aud=c.tenant.issuer, recover=False)
    assert_invalid_session(ended, "session_ended")
    r, renewed = await agent.call(c.http, "GET", orders, user, aud=c.tenant.issuer)
    assert renewed.sid != user.sid and r.status_code == 401 and r.json()["error"] == "sign_in_required"
