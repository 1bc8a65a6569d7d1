"""The funnel's sign-in stages from real flows driven through the issuer: Device and Direct
Sign-Ins prompted, completed, and abandoned before the login page, at it and at consent,
counted exactly on the page, in the CSV and in the rollup, for this tenant only and without
the simulator's client_id; and through the company's own OpenID Provider (a real
``oidc-provider``), where a login cancelled at the IdP is abandoned at the login page; and
step-ups (the agent asking an account it holds a live sign-in of for more) abandoned at
consent, told apart from the others."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_operations.funnel import materialise_closed_days
from frontdoor_sessions import DeviceStore, device_attempt_id, record_decision, record_prompt, record_stage
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_agent_funnel import _row
from tests.integration.console.test_dashboard import sign_in
from tests.integration.signin.conftest import Company, make_company, new_agent
from tests.integration.signin.test_device_pages import company_login, csrf
from tests.integration.signin.test_direct_sign_in import browser_sign_in, params, redeem, setup, to_consent
from tests.integration.signin.test_oidc_sign_in import idp, staged  # noqa: F401 (the real oidc-provider)
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.oidc import OpenIdProvider, login_at_idp

SCOPE = "poppy:read orders:read"
STAGES = ("prompted", "sign_ins", "abandoned_before_login", "abandoned_login", "abandoned_consent")


@pytest.fixture
def store(runtime: Runtime, clock: ShiftableClock) -> DeviceStore:
    return DeviceStore(runtime.redis, clock=clock)


async def _device_to_login(issuer: AsyncTestClient[Any], company: Company, agent: TestAgent) -> tuple[dict[str, Any], str]:
    """The agent asks for a device code; the user enters it and is sent to the company's login page."""
    started = (await company.device(agent, SCOPE)).json()
    issuer.cookies.clear()  # the user's browser
    slug = company.tenant.slug
    page = await issuer.get(f"/{slug}/device", params={"user_code": started["user_code"]})
    r = await issuer.post(f"/{slug}/device", data={"user_code": started["user_code"], "_csrf_token": csrf(page.text)},
                          follow_redirects=False)
    assert r.status_code == 303, r.text
    return started, r.headers["location"]


async def _device_to_consent(issuer: AsyncTestClient[Any], company: Company, key: Any, agent: TestAgent,
                             account: str) -> tuple[dict[str, Any], str]:
    started, location = await _device_to_login(issuer, company, agent)
    response = await company_login(issuer, company.tenant, location, key, account)
    slug = company.tenant.slug
    back = await issuer.post(f"/{slug}/login/callback", data={"response": response}, follow_redirects=False)
    assert back.status_code == 303, back.text
    consent = await issuer.get(f"/{slug}/consent")
    assert consent.status_code == 200, consent.text
    return started, csrf(consent.text)


def _stages(page: str, agent: str) -> dict[str, str]:
    row = _row(page, agent)
    return {m: row[m] for m in ("sessions", *STAGES)}


async def test_sign_in_stages_from_real_device_and_direct_flows(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    clock: ShiftableClock, store: DeviceStore, runtime: Runtime, db: Any, web: MockWeb,
) -> None:
    # No flow may end on another UTC day than it started: near midnight, start after it.
    real = datetime.now(UTC)
    if real.time() > time(23, 30):
        clock.offset = datetime.combine(real.date() + timedelta(days=1), time(0, 30), tzinfo=UTC) - real
    company, key = await setup(console, issuer, tenant, clock, store)  # Device and Direct, a login connection
    other = await make_company(console, issuer, other_tenant, clock, store)
    alpha, beta, simulator = new_agent(web), new_agent(web), new_agent(web)
    await db.execute("INSERT INTO simulator_client_ids (tenant_id, client_id, registered_at) VALUES ($1, $2, now())",
                     tenant.id, simulator.client_id)
    slug = tenant.slug

    # alpha, Device: 1 never entered, 1 left at the login page, 1 denied at consent, 1 completed.
    assert (await company.device(alpha, SCOPE)).status_code == 200
    await _device_to_login(issuer, company, alpha)
    _, token = await _device_to_consent(issuer, company, key, alpha, "acct_denies")
    denied = await issuer.post(f"/{slug}/consent", data={"_csrf_token": token, "decision": "deny"})
    assert denied.status_code == 200 and "denied" in denied.text.lower()
    session = await company.session(alpha, "alice")
    started, token = await _device_to_consent(issuer, company, key, alpha, "acct_alice")
    allowed = await issuer.post(f"/{slug}/consent", data={"_csrf_token": token, "decision": "allow",
                                                          "scope": SCOPE.split(" ")})
    assert allowed.status_code == 200 and "connected" in allowed.text
    polled = await company.poll(alpha, started["device_code"], session["session_id"])
    assert polled.status_code == 200 and polled.json()["signed_in"] is True, polled.text

    # beta, Direct: 1 left undecided at consent, 1 completed (the code redeemed).
    query, _ = params(beta, scope=SCOPE)
    await to_consent(issuer, tenant, key, query, "acct_bob")
    values, direct = await browser_sign_in(issuer, tenant, key, beta, account="acct_bob")
    beta_session = await company.session(beta, "bob")
    redeemed = await redeem(company, beta, values["code"], direct, beta_session["session_id"])
    assert redeemed.status_code == 200, redeemed.text

    # Not counted here: the simulator's sign-in and alpha's in another tenant.
    assert (await company.device(simulator, SCOPE)).status_code == 200
    assert (await other.device(alpha, "poppy:read")).status_code == 200

    await sign_in(console, tenant.email)
    live = (await console.get("/analytics/funnel?days=7")).text
    # Attempts still in progress are not abandoned yet; a denial is, at once.
    assert _stages(live, alpha.client_id) == {"sessions": "1", "prompted": "4", "sign_ins": "1",
                                              "abandoned_before_login": "0", "abandoned_login": "0",
                                              "abandoned_consent": "1"}
    assert _stages(live, beta.client_id) == {"sessions": "1", "prompted": "2", "sign_ins": "1",
                                             "abandoned_before_login": "0", "abandoned_login": "0",
                                             "abandoned_consent": "0"}
    assert f'data-agent="{simulator.client_id}"' not in live
    assert 'data-chart="funnel-abandoned"' in live

    clock.advance(minutes=11)  # past the device codes' and the browser flows' 10 minutes
    expired = (await console.get("/analytics/funnel?days=7")).text
    expected_alpha = {"sessions": "1", "prompted": "4", "sign_ins": "1", "abandoned_before_login": "1",
                      "abandoned_login": "1", "abandoned_consent": "1"}
    expected_beta = {"sessions": "1", "prompted": "2", "sign_ins": "1", "abandoned_before_login": "0",
                     "abandoned_login": "0", "abandoned_consent": "1"}
    assert _stages(expired, alpha.client_id) == expected_alpha
    assert _stages(expired, beta.client_id) == expected_beta
    assert _stages(expired, "total") == {"sessions": "2", "prompted": "6", "sign_ins": "2",
                                         "abandoned_before_login": "1", "abandoned_login": "1",
                                         "abandoned_consent": "2"}
    # What was persisted: one attempt per prompt, with the stages it reached, and no device code.
    rows = await db.fetch("SELECT client_id, type, login_at IS NOT NULL AS login, consent_at IS NOT NULL AS consent,"
                          " allowed FROM sign_in_attempts WHERE tenant_id = $1 ORDER BY created_at", tenant.id)
    assert [(r["client_id"], r["type"], r["login"], r["consent"], r["allowed"]) for r in rows] == [
        (alpha.client_id, "device", False, False, None), (alpha.client_id, "device", True, False, None),
        (alpha.client_id, "device", True, True, False), (alpha.client_id, "device", True, True, True),
        (beta.client_id, "direct", True, True, None), (beta.client_id, "direct", True, True, True),
        (simulator.client_id, "device", False, False, None)]

    # A day later the rollup has them, and the page reads that day from it.
    clock.advance(days=1)
    await materialise_closed_days(runtime.pool, now=clock())
    rolled = await db.fetch(f"SELECT client_id, sessions, {', '.join(STAGES)} FROM agent_funnel_daily"
                            " WHERE tenant_id = $1 ORDER BY client_id", tenant.id)
    assert {r["client_id"]: tuple(r[m] for m in ("sessions", *STAGES)) for r in rolled} == {
        alpha.client_id: (1, 4, 1, 1, 1, 1), beta.client_id: (1, 2, 1, 0, 0, 1)}
    await db.execute("DELETE FROM sign_in_attempts WHERE tenant_id = $1", tenant.id)
    await sign_in(console, tenant.email)  # the console's own session has expired meanwhile
    page = (await console.get("/analytics/funnel?days=7")).text
    assert _stages(page, alpha.client_id) == expected_alpha and _stages(page, beta.client_id) == expected_beta

    r = await console.get("/analytics/funnel.csv?days=7")
    assert r.status_code == 200
    table = {row["client_id"]: row for row in csv.DictReader(io.StringIO(r.text))}
    assert set(table) == {alpha.client_id, beta.client_id}
    assert {m: table[alpha.client_id][m] for m in ("sessions", *STAGES)} == expected_alpha
    assert {m: table[beta.client_id][m] for m in ("sessions", *STAGES)} == expected_beta

    await sign_in(console, other_tenant.email)
    theirs = (await console.get("/analytics/funnel?days=7")).text
    assert _row(theirs, alpha.client_id)["prompted"] == "1" and _row(theirs, alpha.client_id)["sign_ins"] == "0"
    assert f'data-agent="{beta.client_id}"' not in theirs


async def test_sign_in_stages_through_the_companys_idp(
    settings: Settings, console: AsyncTestClient[Any], clock: ShiftableClock, runtime: Runtime, web: MockWeb,
    idp: OpenIdProvider,  # noqa: F811
) -> None:
    """An ``oidc`` login connection: the IdP is the login page. A login cancelled there is
    abandoned at the login page at once; one the IdP vouches for reaches consent."""
    async with staged(settings, console, clock, runtime, web, idp) as stage:
        agent = new_agent(web)
        c = stage.company
        session = await c.session(agent, "alice")
        _, location = await stage.device_to_idp(agent)
        cancelled = await login_at_idp(location, login="ada", stop_at=stage.callback_url, cancel=True)
        assert (await stage.back(cancelled)).status_code == 200
        started, back_url = await stage.device_to_callback(agent)
        assert (await stage.back(back_url)).status_code == 303
        await stage.consent(["poppy:read"])
        polled = await c.poll(agent, started["device_code"], session["session_id"])
        assert polled.status_code == 200, polled.text
        _, location = await stage.device_to_idp(agent)
        back_url = await login_at_idp(location, login="ada", stop_at=stage.callback_url)
        assert (await stage.back(back_url)).status_code == 303  # at consent, then left there: ada
        # is signed in to this agent already, so this is a step-up

        await sign_in(console, c.tenant.email)
        page = (await console.get("/analytics/funnel?days=7")).text
        assert _stages(page, agent.client_id) == {"sessions": "1", "prompted": "3", "sign_ins": "1",
                                                  "abandoned_before_login": "0", "abandoned_login": "1",
                                                  "abandoned_consent": "0"}
        clock.advance(minutes=11)
        page = (await console.get("/analytics/funnel?days=7")).text
        row = _row(page, agent.client_id)
        assert (row["abandoned_consent"], row["abandoned_step_up"]) == ("0", "1")


async def test_an_attempt_moves_forward_only_in_its_own_tenant_and_until_it_ends(
    tenant: TenantHandle, other_tenant: TenantHandle, runtime: Runtime, clock: ShiftableClock, db: Any,
) -> None:
    now = clock()
    attempt = device_attempt_id("ab" * 32)
    later = now + timedelta(seconds=30)
    async with runtime.pool.acquire() as conn:
        await record_prompt(conn, tenant.id, attempt, client_id="https://a.example/agent.json", sign_in_type="device",
                            now=now, expires_at=now + timedelta(minutes=10))
        # Another tenant can neither move nor decide it.
        assert not await record_stage(conn, other_tenant.id, attempt, "login", now=now)
        assert not await record_decision(conn, other_tenant.id, attempt, allowed=True, now=now)
        assert await record_stage(conn, tenant.id, attempt, "login", now=now)
        assert await record_stage(conn, tenant.id, attempt, "login", now=later)  # reached again: the first time stays
        assert await record_decision(conn, tenant.id, attempt, allowed=False, now=later)
        assert not await record_decision(conn, tenant.id, attempt, allowed=True, now=later)  # the first decision stands
        assert not await record_stage(conn, tenant.id, attempt, "consent", now=later)  # decided: over
        ended = device_attempt_id("cd" * 32)
        await record_prompt(conn, tenant.id, ended, client_id="https://a.example/agent.json", sign_in_type="device",
                            now=now, expires_at=now + timedelta(minutes=10))
        assert not await record_stage(conn, tenant.id, ended, "login", now=now + timedelta(minutes=10))  # expired
    row = await db.fetchrow("SELECT login_at, consent_at, decided_at, allowed FROM sign_in_attempts"
                            " WHERE tenant_id = $1 AND id = $2", tenant.id, attempt)
    assert (row["login_at"], row["consent_at"], row["decided_at"], row["allowed"]) == (now, None, later, False)
    assert await db.fetchval("SELECT login_at FROM sign_in_attempts WHERE tenant_id = $1 AND id = $2",
                             tenant.id, ended) is None
    assert not await db.fetchval("SELECT count(*) FROM sign_in_attempts WHERE tenant_id = $1", other_tenant.id)


STEP_UP = ("prompted", "sign_ins", "abandoned_consent", "abandoned_step_up")


async def test_step_ups_abandoned_are_told_apart_from_real_flows(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    clock: ShiftableClock, store: DeviceStore, runtime: Runtime, db: Any, web: MockWeb,
) -> None:
    """A step-up (PAP §4.4: an agent asking a user it is connected to for more takes a new
    sign-in) is known once the login names the account: a live sign-in of that account by the
    same agent, in this tenant. Abandoned at consent, it counts at step-up, not at consent."""
    real = datetime.now(UTC)
    if real.time() > time(23, 30):
        clock.offset = datetime.combine(real.date() + timedelta(days=1), time(0, 30), tzinfo=UTC) - real
    company, key = await setup(console, issuer, tenant, clock, store)
    other, other_key = await setup(console, issuer, other_tenant, clock, store)
    alpha, beta = new_agent(web), new_agent(web)
    slug = tenant.slug

    async def device(agent: TestAgent, account: str, decision: str | None, session_id: str | None = None,
                     at: Company = company, with_key: Any = key) -> None:
        """One Device attempt to consent for ``account``: allowed (and polled), denied, or left there."""
        started, token = await _device_to_consent(issuer, at, with_key, agent, account)
        if decision is None:
            return
        r = await issuer.post(f"/{at.tenant.slug}/consent", data={"_csrf_token": token, "decision": decision,
                                                                  "scope": SCOPE.split(" ")})
        assert r.status_code == 200, r.text
        if decision == "allow":
            assert session_id is not None
            polled = await at.poll(agent, started["device_code"], session_id)
            assert polled.status_code == 200 and polled.json()["signed_in"] is True, polled.text

    # alpha signs alice in (Device), then asks her again: denied, left at consent, allowed (and
    # redeemed on the same Session: the step-up completed).
    alice = (await company.session(alpha, "alice"))["session_id"]
    await device(alpha, "acct_alice", "allow", alice)
    await device(alpha, "acct_alice", "deny")
    await device(alpha, "acct_alice", None)
    await device(alpha, "acct_alice", "allow", alice)
    # Not step-ups: an account alpha never signed in (bob), one whose sign-in was revoked (carol).
    await device(alpha, "acct_bob", "deny")
    carol = (await company.session(alpha, "carol"))["session_id"]
    await device(alpha, "acct_carol", "allow", carol)
    r = await console.post("/api/v1/accounts/acct_carol/disconnect", json={}, headers=tenant.auth)
    assert r.status_code == 200 and r.json()["sign_ins_revoked"] == 1, r.text
    await device(alpha, "acct_carol", "deny")
    # beta, Direct: alice is alpha's, not beta's (not a step-up); dan signs in, then is asked again
    # and leaves it at consent (a step-up).
    query, _ = params(beta, scope=SCOPE)
    refused = await issuer.post(f"/{slug}/consent", data={
        "_csrf_token": csrf((await to_consent(issuer, tenant, key, query, "acct_alice")).text), "decision": "deny"},
        follow_redirects=False)
    assert refused.status_code == 303 and "error=access_denied" in refused.headers["location"]
    values, direct = await browser_sign_in(issuer, tenant, key, beta, account="acct_dan")
    dan = (await company.session(beta, "dan"))["session_id"]
    assert (await redeem(company, beta, values["code"], direct, dan)).status_code == 200
    query, _ = params(beta, scope=SCOPE)
    await to_consent(issuer, tenant, key, query, "acct_dan")
    # Another tenant: alpha's sign-in of alice here makes nothing a step-up there.
    await device(alpha, "acct_alice", "deny", at=other, with_key=other_key)

    def stages(page: str, agent: str) -> dict[str, str]:
        row = _row(page, agent)
        return {m: row[m] for m in STEP_UP}

    await sign_in(console, tenant.email)
    live = (await console.get("/analytics/funnel?days=7")).text
    assert stages(live, alpha.client_id) == {"prompted": "7", "sign_ins": "3", "abandoned_consent": "2",
                                             "abandoned_step_up": "1"}
    assert stages(live, beta.client_id) == {"prompted": "3", "sign_ins": "1", "abandoned_consent": "1",
                                            "abandoned_step_up": "0"}
    clock.advance(minutes=11)  # the two left at consent expire: abandoned there
    expected = {alpha.client_id: {"prompted": "7", "sign_ins": "3", "abandoned_consent": "2", "abandoned_step_up": "2"},
                beta.client_id: {"prompted": "3", "sign_ins": "1", "abandoned_consent": "1", "abandoned_step_up": "1"}}
    expired = (await console.get("/analytics/funnel?days=7")).text
    assert {a: stages(expired, a) for a in expected} == expected
    assert stages(expired, "total") == {"prompted": "10", "sign_ins": "4", "abandoned_consent": "3",
                                        "abandoned_step_up": "3"}
    assert '<span class="swatch series-step-up"></span>at a step-up' in expired
    # What was persisted: the step-up decided at consent, from this tenant's and agent's sign-ins.
    rows = await db.fetch("SELECT client_id, step_up, allowed FROM sign_in_attempts WHERE tenant_id = $1"
                          " ORDER BY created_at", tenant.id)
    assert [(r["client_id"], r["step_up"], r["allowed"]) for r in rows] == [
        (alpha.client_id, False, True), (alpha.client_id, True, False), (alpha.client_id, True, None),
        (alpha.client_id, True, True), (alpha.client_id, False, False), (alpha.client_id, False, True),
        (alpha.client_id, False, False), (beta.client_id, False, False), (beta.client_id, False, True),
        (beta.client_id, True, None)]
    assert await db.fetchval("SELECT step_up FROM sign_in_attempts WHERE tenant_id = $1", other_tenant.id) is False

    # The rollup: the same counts, then the page and the CSV read them from it.
    clock.advance(days=1)
    await materialise_closed_days(runtime.pool, now=clock())
    rolled = await db.fetch(f"SELECT client_id, {', '.join(STEP_UP)} FROM agent_funnel_daily WHERE tenant_id = $1",
                            tenant.id)
    assert {r["client_id"]: {m: str(r[m]) for m in STEP_UP} for r in rolled} == expected
    await db.execute("DELETE FROM sign_in_attempts WHERE tenant_id = $1", tenant.id)
    await sign_in(console, tenant.email)
    page = (await console.get("/analytics/funnel?days=7")).text
    assert {a: stages(page, a) for a in expected} == expected
    exported = (await console.get("/analytics/funnel.csv?days=7")).text
    table = {row["client_id"]: {m: row[m] for m in STEP_UP} for row in csv.DictReader(io.StringIO(exported))}
    assert table == expected

    await sign_in(console, other_tenant.email)
    theirs = (await console.get("/analytics/funnel?days=7")).text
    assert stages(theirs, alpha.client_id) == {"prompted": "1", "sign_ins": "0", "abandoned_consent": "1",
                                               "abandoned_step_up": "0"}
