"""Northwind's PAP 1.0 join callback against the real issuer (ADR 0004 §8, [S §6]).

The three steps run on the issuer (in-process, real PostgreSQL and Redis); the browser then
posts the join assertion to Northwind's ``/poppy/join`` (the sdk's JoinCallback), whose
cookie is re-checked against the Session at Frontdoor on every view: it never outlives
the Session. The agent side is signed with mint_delegation/mint_poppy_session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from frontdoor_sdk import JOIN_COOKIE
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig, create_app

from tests.integration.conftest import TenantHandle
from tests.integration.issuer.test_pap10_browser_join import (
    _FORM,
    Signer,
    access_token,
    agent,  # noqa: F401  (the fixture)
    authorize,
    offer_join,
    redeem,
    step1,
)
from tests.integration.issuer.test_pap10_issuer_endpoints import _dashboard_revoke
from tests.integration.signin.conftest import configure, resource_credential
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@asynccontextmanager
async def northwind(issuer: AsyncTestClient[Any], tenant: TenantHandle, credential: str, callback: str,
                    clock: ShiftableClock) -> AsyncIterator[httpx.AsyncClient]:
    origin = callback.rsplit("/poppy/join", 1)[0]
    config = NorthwindConfig(issuer=tenant.issuer, credential=credential, public_url=origin,
                             poppy={"protocol_version": "1.0", "auth": {"issuer": tenant.issuer}},
                             http_client=issuer, clock=clock)
    app = create_app(config)
    async with app.lifespan(), httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=origin) as client:
        yield client


async def joined_assertion(issuer: AsyncTestClient[Any], tenant: TenantHandle, signer: Signer, *,
                           token: str | None = None) -> str:
    code, cookie = await step1(issuer, tenant)
    r = await authorize(issuer, tenant, signer, code, token=token)
    assert r.status_code == 204, r.text
    form = _FORM.search((await redeem(issuer, tenant, code, cookie)).text)
    assert form is not None
    return form.group(2)


async def test_the_join_ends_in_northwinds_cookie_which_dies_with_the_session(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock, db: Any,  # noqa: F811
) -> None:
    callback = await offer_join(console, tenant, dns)
    credential = await resource_credential(console, tenant)
    signer = Signer(agent, tenant, clock)
    assertion = await joined_assertion(issuer, tenant, signer)
    async with northwind(issuer, tenant, credential, callback, clock) as shop:
        r = await shop.post("/poppy/join", content=f"assertion={assertion}", headers=FORM)
        assert r.status_code == 303, r.text
        assert r.headers["location"] == "/joined" and r.headers["cache-control"] == "no-store"
        set_cookie = r.headers["set-cookie"]
        assert set_cookie.startswith(f"{JOIN_COOKIE}=")
        assert {"secure", "httponly", "samesite=lax", "path=/"} <= {f.strip().lower() for f in set_cookie.split(";")}
        assert "max-age" not in set_cookie.lower()
        page = await shop.get("/joined")
        assert page.status_code == 200 and "is a guest" in page.text  # signed out: never a user
        # One use: the same assertion again is refused and sets no cookie.
        shop.cookies.clear()
        again = await shop.post("/poppy/join", content=f"assertion={assertion}", headers=FORM)
        assert again.status_code == 400 and "set-cookie" not in again.headers
        # A forged (edited) cookie is no join.
        shop.cookies.set(JOIN_COOKIE, set_cookie.split(";")[0].split("=", 1)[1][:-2] + "AA", domain=callback.split("/")[2])
        forged = await shop.get("/joined")
        assert "not joined" in forged.text
        # The Session ends: the next view says so and deletes the cookie [S §6].
        shop.cookies.clear()
        shop.cookies.set(JOIN_COOKIE, set_cookie.split(";")[0].split("=", 1)[1], domain=callback.split("/")[2])
        assert "is a guest" in (await shop.get("/joined")).text
        session = await db.fetchval("SELECT id FROM pap_sessions WHERE tenant_id = $1 AND agent_sid = $2",
                                    tenant.id, signer.sid)
        await _dashboard_revoke(console, tenant, session)
        after = await shop.get("/joined")
        assert after.status_code == 200 and "not joined" in after.text
        assert after.headers["set-cookie"].startswith(f"{JOIN_COOKIE}=;") and "Max-Age=0" in after.headers["set-cookie"]
        # An assertion for a Session that has ended sets no cookie either.
        shop.cookies.clear()


async def test_a_signed_in_join_is_the_account_until_the_sign_in_is_revoked(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
    agent: TestAgent, clock: ShiftableClock, runtime: Any, kek_value: str,  # noqa: F811
) -> None:
    await configure(console, tenant, device={"enabled": True, "scopes": ["poppy:read"]})
    callback = await offer_join(console, tenant, dns)
    credential = await resource_credential(console, tenant)
    token, _ = await access_token(runtime, kek_value, tenant, agent, clock, account="acct-7", scope="poppy:read")
    assertion = await joined_assertion(issuer, tenant, Signer(agent, tenant, clock), token=token)
    async with northwind(issuer, tenant, credential, callback, clock) as shop:
        assert (await shop.post("/poppy/join", content=f"assertion={assertion}", headers=FORM)).status_code == 303
        page = await shop.get("/joined")
        assert "signed in as acct-7 (poppy:read)" in page.text
        r = await console.post("/api/v1/accounts/acct-7/disconnect", json={}, headers=tenant.auth)
        assert r.status_code == 200
        after = await shop.get("/joined")
        assert "is a guest" in after.text  # the Session lives on signed out [S §5]


async def test_another_tenants_assertion_is_refused(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, agent: TestAgent, clock: ShiftableClock,  # noqa: F811
) -> None:
    callback = await offer_join(console, tenant, dns)
    await offer_join(console, other_tenant, dns)
    credential = await resource_credential(console, tenant)
    theirs = await joined_assertion(issuer, other_tenant, Signer(agent, other_tenant, clock))
    async with northwind(issuer, tenant, credential, callback, clock) as shop:
        r = await shop.post("/poppy/join", content=f"assertion={theirs}", headers=FORM)
        assert r.status_code == 400 and "set-cookie" not in r.headers
        assert "not joined" in (await shop.get("/joined")).text
