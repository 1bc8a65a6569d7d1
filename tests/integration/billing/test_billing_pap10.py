"""Billing at the issuer, the checks' order and PAP 1.0 (docs/billing.md): once a tenant's
grace period has ended unpaid, ``POST {issuer}/poppy/session-state`` refuses a Session it
has never seen (``503 temporarily_unavailable`` with ``Retry-After``, no row written) while
a known Session's state is still answered; another tenant is untouched; paying lifts it.
The hosted browser join's ``POST {issuer}/join/authorize`` likewise.
At the token endpoint the suspension is asked only after client authentication: an
unauthenticated caller gets ``invalid_client``, never the 503. The ledger, which also starts
1.0 Sessions at first sight, refuses them the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from frontdoor_core.settings import Settings
from frontdoor_sessions import DeviceStore
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.billing.test_billing_issuer import _new_session
from tests.integration.conftest import TenantHandle, sign_up
from tests.integration.issuer.test_pap10_browser_join import Signer, authorize, offer_join, step1
from tests.integration.ledger.conftest import LEDGER
from tests.integration.pap10.conftest import make_shop
from tests.integration.pap10.conftest import new_agent as pap10_agent
from tests.integration.signin.conftest import make_company, new_agent, resource_credential
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Session as Pap10Session


async def _suspend(db: Any, clock: ShiftableClock, tenant_id: str) -> None:
    """The grace period of an unpaid invoice ended a day ago (and the issuer's cached read expires)."""
    await db.execute("INSERT INTO billing_accounts (tenant_id, plan, stripe_customer_id, payment_failed_at,"
                     " grace_until, updated_at) VALUES ($1, 'growth', $2, $3, $4, now()) ON CONFLICT (tenant_id)"
                     " DO UPDATE SET payment_failed_at = $3, grace_until = $4", tenant_id, f"cus_{tenant_id}",
                     clock() - timedelta(days=8), clock() - timedelta(days=1))
    clock.advance(seconds=31)


async def _pay(db: Any, clock: ShiftableClock, tenant_id: str) -> None:
    await db.execute("UPDATE billing_accounts SET payment_failed_at = NULL, grace_until = NULL WHERE tenant_id = $1",
                     tenant_id)
    clock.advance(seconds=31)


def _claims(agent: TestAgent, clock: ShiftableClock, sid: str) -> dict[str, Any]:
    return {"client_id": agent.client_id, "sid": sid, "sub": "alice", "jti": unique("jti-"),
            "iat": int(clock().timestamp())}


async def _state(issuer: AsyncTestClient[Any], t: TenantHandle, secret: str, body: dict[str, Any]) -> Any:
    r = await issuer.post(f"/{t.slug}/poppy/session-state", json=body, headers={"Authorization": f"Bearer {secret}"})
    assert r.headers["cache-control"] == "no-store"
    return r


async def _rows(db: Any, tenant_id: str, sid: str) -> int:
    return int(await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1 AND agent_sid = $2"
                                 " AND profile = '1.0'", tenant_id, sid))


async def test_session_state_refuses_a_new_1_0_session_while_suspended(
        billed_console: AsyncTestClient[Any], billed_issuer: AsyncTestClient[Any], clock: ShiftableClock,
        web: MockWeb, db: Any) -> None:
    t, other = await sign_up(billed_console), await sign_up(billed_console)
    mine, theirs = await resource_credential(billed_console, t), await resource_credential(billed_console, other)
    agent = new_agent(web)
    known = unique("sid-")
    first = await _state(billed_issuer, t, mine, _claims(agent, clock, known))
    assert first.status_code == 200 and first.json()["state"] == "active", first.text
    session = first.json()["session"]

    await _suspend(db, clock, t.id)
    fresh = unique("sid-")
    for _ in range(2):  # [PAP-4.3-18] the agent is told when to retry; nothing about the bill
        r = await _state(billed_issuer, t, mine, _claims(agent, clock, fresh))
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "temporarily_unavailable"
        assert r.headers["retry-after"] == "3600"
        assert "billing" not in r.text.lower() and "invoice" not in r.text.lower()
    assert await _rows(db, t.id, fresh) == 0
    # a known Session's state is still answered (the same Session)
    again = await _state(billed_issuer, t, mine, _claims(agent, clock, known))
    assert again.status_code == 200 and again.json() == {"state": "active", "session": session, "signed_in": False}
    # another tenant starts 1.0 Sessions
    elsewhere = unique("sid-")
    r = await _state(billed_issuer, other, theirs, _claims(agent, clock, elsewhere))
    assert r.status_code == 200 and r.json()["state"] == "active", r.text
    assert await _rows(db, other.id, elsewhere) == 1

    # paid: lifted once the issuer's cached read expires
    await _pay(db, clock, t.id)
    r = await _state(billed_issuer, t, mine, _claims(agent, clock, fresh))
    assert r.status_code == 200 and r.json()["state"] == "active", r.text
    assert await _rows(db, t.id, fresh) == 1


async def test_unauthenticated_session_request_of_a_suspended_tenant_is_invalid_client(
        billed_console: AsyncTestClient[Any], billed_issuer: AsyncTestClient[Any], clock: ShiftableClock,
        runtime: Any, web: MockWeb, db: Any) -> None:
    t = await sign_up(billed_console)
    company = await make_company(billed_console, billed_issuer, t, clock, DeviceStore(runtime.redis, clock=clock))
    agent, stranger = new_agent(web), new_agent(web)
    await _suspend(db, clock, t.id)
    assert (await _new_session(company, agent, "u")).status_code == 503
    now = company.now()
    form = {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "assertion": agent.session_assertion(t.issuer, "u", iat=now, exp=now + 120)}
    # another agent's client assertion: the caller is not who it claims to be (PAP-4.1-05)
    forged = {**company.client_form(agent),
              "client_assertion": stranger.client_assertion(t.issuer, iat=now, exp=now + 60)}
    r = await billed_issuer.post(f"/{t.slug}/oauth/token", data={**form, **forged}, headers=company.proof(agent))
    assert r.status_code == 401 and r.json()["error"] == "invalid_client", r.text
    assert "retry-after" not in r.headers
    # no client assertion at all
    r = await billed_issuer.post(f"/{t.slug}/oauth/token", data={**form, "client_id": agent.client_id},
                                 headers=company.proof(agent))
    assert r.status_code == 401 and r.json()["error"] == "invalid_client", r.text


async def test_browser_join_refuses_a_new_1_0_session_while_suspended(
        billed_console: AsyncTestClient[Any], billed_issuer: AsyncTestClient[Any], clock: ShiftableClock,
        web: MockWeb, dns: LocalDNS, db: Any) -> None:
    """``POST {issuer}/join/authorize`` creates a 1.0 Session at first sight: refused the same way."""
    t = await sign_up(billed_console)
    await offer_join(billed_console, t, dns)
    agent = new_agent(web)
    known = Signer(agent, t, clock)
    code, _ = await step1(billed_issuer, t)
    assert (await authorize(billed_issuer, t, known, code)).status_code == 204

    await _suspend(db, clock, t.id)
    newcomer = Signer(agent, t, clock)
    code, _ = await step1(billed_issuer, t)
    r = await authorize(billed_issuer, t, newcomer, code)
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable", r.text
    assert r.headers["retry-after"] == "3600" and r.headers["cache-control"] == "no-store"
    assert await _rows(db, t.id, newcomer.sid) == 0
    # the known Session joins a browser (the same code: it was not used up by the refusal)
    assert (await authorize(billed_issuer, t, known, code)).status_code == 204


@pytest.fixture(scope="session")
async def billed_ledger(billed_settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb
                        ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The ledger with billing on: it starts 1.0 Sessions at first sight too (ADR 0004 §9)."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    app = create_app(billed_settings, clock=clock, fetcher=SafeFetcher(transport=web))
    async with AsyncTestClient(app, base_url=LEDGER) as client:
        yield client


async def test_the_ledger_refuses_a_new_1_0_session_while_suspended(
        billed_console: AsyncTestClient[Any], billed_issuer: AsyncTestClient[Any],
        billed_ledger: AsyncTestClient[Any], clock: ShiftableClock, web: MockWeb, db: Any) -> None:
    """A 1.0 request at the ledger with a never-seen ``sid`` would create a Session row: refused
    like ``session-state`` (503 + ``Retry-After``, no row); a known Session's operation is read."""
    t = await sign_up(billed_console)
    shop = await make_shop(billed_console, billed_issuer, billed_ledger, t, clock, web)
    agent, known = pap10_agent(web, clock), Pap10Session(sub=unique("user-"))
    op = await shop.operation(db, agent, known)

    await _suspend(db, clock, t.id)
    fresh = Pap10Session(sub=unique("user-"))
    r = await shop.read(agent, fresh, op["operation_id"])
    assert r.status_code == 503 and r.json()["error"] == "temporarily_unavailable", r.text
    assert r.headers["retry-after"] == "3600" and r.headers["cache-control"] == "no-store"
    assert "billing" not in r.text.lower()
    assert await _rows(db, t.id, fresh.sid) == 0
    r = await shop.read(agent, known, op["operation_id"])  # the known Session goes on
    assert r.status_code == 200 and r.json()["state"] == "proposed", r.text

    await _pay(db, clock, t.id)
    r = await shop.read(agent, fresh, "op_" + "0" * 26)  # seen now: an unknown operation, not a refusal
    assert r.status_code == 404, r.text
    assert await _rows(db, t.id, fresh.sid) == 1
