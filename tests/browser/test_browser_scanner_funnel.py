"""The public domain scanner and the agent funnel in a real browser (issue #19 §2/§3 proof).

A console served by uvicorn whose scanner fetches from a pretend internet (``MockWeb``):
a domain serving exactly what Frontdoor generates for it (the real issuer app answering
its issuer URLs) scores 100 with no finding; the same domain with the wrong domain in its
``poppy.json``, and a domain with no ``poppy.json`` at all, show the right finding code and
its fix link. The result URL is shareable (a reload and a second browser show the same
result) and the page works with JavaScript disabled.

The agent funnel, after a scripted set of journeys (Sessions started at the real issuer, two
Device Sign-Ins driven through its pages and the company's signed login handoff, one
completed by the agent's poll and one denied at consent, an operation proposed, approved
and performed), shows exactly those counts.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.settings import Settings
from frontdoor_tenancy.scanner import scanner_policy
from litestar.testing import AsyncTestClient
from playwright.async_api import expect

from tests.conftest import unique
from tests.integration.conftest import sign_up
from tests.integration.scanner.test_scanner import publish_good_domain
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

pytestmark = pytest.mark.browser
DOCS = "https://docs.frontdoor.test/docs/"  # FRONTDOOR_DOCS_BASE_URL of the console under test


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def scan_web() -> MockWeb:
    """The internet as the browser-tested scanner sees it."""
    return MockWeb()


@pytest.fixture(scope="session")
async def api(settings: Settings, migrated: str, clock: ShiftableClock, scan_web: MockWeb
              ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The console's API in-process: sign up, claim and verify a domain, read its generated documents."""
    from frontdoor_console.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=scan_web),
                     scanner_fetcher=SafeFetcher(scanner_policy(), transport=scan_web))
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
        yield client


@pytest.fixture(scope="session")
async def issuer_app(settings: Settings, migrated: str, clock: ShiftableClock, scan_web: MockWeb
                     ) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_issuer.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=scan_web))
    async with AsyncTestClient(app, base_url="https://issuer.frontdoor.test") as client:
        yield client


@pytest.fixture(scope="session")
async def scan_site(settings: Settings, migrated: str, clock: ShiftableClock, scan_web: MockWeb) -> AsyncIterator[str]:
    """The base URL of a console over a real socket whose scanner fetches from ``scan_web``."""
    import uvicorn
    from frontdoor_console.app import create_app

    tuned = msgspec.structs.replace(settings, scanner_rate_limit=100_000, scanner_target_rate_limit=100_000,
                                    docs_base_url=DOCS)
    app = create_app(tuned, clock=clock, fetcher=SafeFetcher(transport=scan_web),
                     scanner_fetcher=SafeFetcher(scanner_policy(), transport=scan_web))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the console did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


@pytest.fixture
async def scan_context(browser: Any, scan_site: str) -> AsyncIterator[Any]:
    ctx = await browser.new_context(base_url=scan_site)
    ctx.set_default_timeout(10_000)
    try:
        yield ctx
    finally:
        await ctx.close()


@pytest.fixture
async def no_js_context(browser: Any, scan_site: str) -> AsyncIterator[Any]:
    ctx = await browser.new_context(base_url=scan_site, java_script_enabled=False)
    ctx.set_default_timeout(10_000)
    try:
        yield ctx
    finally:
        await ctx.close()


async def _scan(page: Any, domain: str) -> None:
    """Scan ``domain`` through the form, as a visitor would."""
    await page.goto("/scan")
    await page.fill("input[name=domain]", domain)
    await page.click("button[type=submit]")
    await expect(page).to_have_url(f"{page.url.split('/scan')[0]}/scan/{domain.lower()}")


async def _findings(page: Any) -> list[str]:
    return [str(await a.get_attribute("data-finding")) for a in await page.locator("[data-finding]").all()]


async def test_a_good_domain_scores_100_and_its_shared_url_shows_the_same_result(
    scan_context: Any, no_js_context: Any, api: AsyncTestClient[Any], issuer_app: AsyncTestClient[Any],
    dns: LocalDNS, scan_web: MockWeb,
) -> None:
    tenant = await sign_up(api)
    domain = await publish_good_domain(api, issuer_app, tenant, dns, scan_web)
    page = await scan_context.new_page()
    await _scan(page, domain.upper())  # normalised: the shareable URL names the domain in lower case
    result = page.locator("section[data-score]")
    await expect(result).to_have_attribute("data-score", "100")
    await expect(result).to_have_attribute("data-ok", "true")
    await expect(result.locator("[data-count=score]")).to_have_text("100")
    await expect(result).to_contain_text("agents can use it")
    assert await _findings(page) == ["none"]
    for source in ("poppy.json", "issuer metadata", "jwks", "sign-in", "listings"):
        await expect(result.locator(f"tr[data-check='{source}']")).to_contain_text("passed")
    scanned_at = await result.locator("p.muted.small").first.inner_text()
    fetches_before = len(scan_web.requests)

    # Shareable: reloading the URL, and opening it in a browser without JavaScript, show the same
    # result (the cached one) and send nothing to the domain.
    await page.reload()
    await expect(result).to_have_attribute("data-score", "100")
    assert "(a recent result, kept a few minutes)" in await result.locator("p.muted.small").first.inner_text()
    shared = await no_js_context.new_page()
    await shared.goto(f"/scan/{domain}")
    shared_result = shared.locator("section[data-score]")
    await expect(shared_result).to_have_attribute("data-score", "100")
    assert await _findings(shared) == ["none"]
    assert (await shared_result.locator("p.muted.small").first.inner_text()).split(";")[0].startswith(
        scanned_at.split(";")[0])
    await expect(shared_result.locator(f"a[href='/scan/{domain}']")).to_be_visible()
    assert len(scan_web.requests) == fetches_before


async def test_a_broken_domain_shows_the_finding_and_its_fix_with_javascript_disabled(
    no_js_context: Any, api: AsyncTestClient[Any], issuer_app: AsyncTestClient[Any], dns: LocalDNS,
    scan_web: MockWeb,
) -> None:
    tenant = await sign_up(api)
    domain = await publish_good_domain(api, issuer_app, tenant, dns, scan_web)
    doc = (await api.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    doc["organization"]["domain"] = "www." + domain  # the wrong domain in poppy.json
    scan_web.serve(f"https://{domain}/.well-known/poppy.json", json=doc, headers={"cache-control": "public, max-age=300"})

    page = await no_js_context.new_page()
    await _scan(page, domain)  # the form is a plain GET: it works without JavaScript
    result = page.locator("section[data-score]")
    await expect(result).to_have_attribute("data-ok", "false")
    await expect(result).to_contain_text("agents will refuse it")
    finding = result.locator("article[data-finding=domain_mismatch]")
    await expect(finding).to_contain_text("error")
    fix = finding.locator("a", has_text="Read more")
    await expect(fix).to_have_attribute("href", DOCS + "poppy-json.md#publish-check-findings")
    score = int(str(await result.get_attribute("data-score")))
    assert score < 100
    await page.reload()
    await expect(result).to_have_attribute("data-score", str(score))
    await expect(result.locator("article[data-finding=domain_mismatch]")).to_be_visible()


async def test_a_domain_without_poppy_json_shows_why_and_how_to_fix_it(
    scan_context: Any, scan_web: MockWeb,
) -> None:
    domain = f"{unique('bare-')}.example.com"
    scan_web.serve(f"https://{domain}/.well-known/poppy.json", status=404, body=b"Not Found",
                   headers={"content-type": "text/plain"})
    page = await scan_context.new_page()
    await _scan(page, domain)
    result = page.locator("section[data-score]")
    await expect(result).to_have_attribute("data-ok", "false")
    await expect(result.locator("tr[data-check='poppy.json']")).to_contain_text("failed")
    codes = await _findings(page)
    assert codes and codes[0] == "not_found", codes
    fix = result.locator(f"article[data-finding={codes[0]}] a", has_text="Read more")
    assert str(await fix.get_attribute("href")).startswith(DOCS)


async def test_the_funnel_page_shows_exactly_what_a_scripted_set_of_agent_journeys_did(
    context: Any, db: Any, runtime: Any, live_issuer: Any, agent_web: MockWeb,
) -> None:
    from frontdoor_operations import ledger
    from frontdoor_sdk import login_signing_key

    from tests.browser.test_browser_journeys import BROWSER_ISSUER, _sign_in, _sign_up, _tenant_id
    from tests.integration.conftest import TenantHandle
    from tests.integration.console.test_operation_pages import add_operation
    from tests.integration.signin.test_device_pages import LOGIN, company_login, csrf
    from tests.support.agent import CLIENT_ASSERTION_TYPE
    from tests.support.agent import TestAgent as Agent

    page = await context.new_page()
    slug, email = await _sign_up(page)
    api_key = (await page.locator("#new-api-key").inner_text()).strip()
    tenant_id = await _tenant_id(db, email)
    auth = {"Authorization": f"Bearer {api_key}"}
    issuer = f"{BROWSER_ISSUER}/{slug}"
    tenant = TenantHandle(id=tenant_id, slug=slug, email=email, api_key=api_key, issuer=issuer)
    # The company's login connection (a signed handoff) and Device Sign-In, before the issuer first sees it.
    key = login_signing_key()
    public = {**key.as_dict(private=False), "kid": key.kid}
    settings = (await (await page.request.get("/api/v1/issuer", headers=auth)).json())["settings"]
    settings.update(device={"enabled": True, "scopes": ["poppy:read"]}, login={"url": LOGIN, "public_jwk": public})
    r = await page.request.put("/api/v1/issuer", headers=auth, data=settings)
    assert r.status == 200, await r.text()
    r = await page.request.post("/api/v1/webhook-endpoints", headers=auth,
                                data={"url": f"https://{unique('hooks-')}.example/perform", "event_types": []})
    assert r.status == 201, await r.text()
    kind = unique("order.place-")
    r = await page.request.put(f"/api/v1/operation-kinds/{kind}", headers=auth,
                               data={"perform_endpoint_id": (await r.json())["endpoint"]["id"],
                                     "scopes": ["orders:write"]})
    assert r.status == 200, await r.text()

    # The script: one agent starts 3 Sessions at the real issuer and prompts 3 Device Sign-Ins; the
    # user enters the code, signs in at the company and allows the first (the agent's poll completes
    # it) and denies the second at consent; the agent asks acct-1 again (a step-up), denied at
    # consent too; 1 operation is proposed, approved and performed.
    agent = Agent(host=f"{unique('funnel-')}.example", name="Funnel Assistant").publish(agent_web)
    sessions = []
    for user in ("user-1", "user-2", "user-3"):
        started = await live_issuer.post(f"/{slug}/oauth/token", data=agent.token_form(issuer, user),
                                         headers={"DPoP": agent.dpop("POST", f"{issuer}/oauth/token")})
        assert started.status_code == 200, started.text
        sessions.append(started.json()["session_id"])

    async def device_to_consent(account: str) -> tuple[str, str]:
        """The agent asks for a device code; the user enters it, signs in at the company, reaches consent."""
        r = await live_issuer.post(f"/{slug}/oauth/device", data={
            "client_id": agent.client_id, "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": agent.client_assertion(issuer), "scope": "poppy:read"})
        assert r.status_code == 200, r.text
        device = r.json()
        live_issuer.cookies.clear()  # the user's browser
        enter = await live_issuer.get(f"/{slug}/device", params={"user_code": device["user_code"]})
        r = await live_issuer.post(f"/{slug}/device", data={"user_code": device["user_code"],
                                                            "_csrf_token": csrf(enter.text)}, follow_redirects=False)
        assert r.status_code == 303, r.text
        response = await company_login(live_issuer, tenant, r.headers["location"], key, account)
        r = await live_issuer.post(f"/{slug}/login/callback", data={"response": response}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"{issuer}/consent", r.text
        consent = await live_issuer.get(f"/{slug}/consent")
        assert consent.status_code == 200, consent.text
        return device["device_code"], csrf(consent.text)

    device_code, token = await device_to_consent("acct-1")
    r = await live_issuer.post(f"/{slug}/consent", data={"_csrf_token": token, "decision": "allow",
                                                         "scope": ["poppy:read"]})
    assert r.status_code == 200 and "connected" in r.text, r.text
    polled = await live_issuer.post(f"/{slug}/oauth/token", data={
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device_code,
        "session_id": sessions[0], "client_id": agent.client_id, "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": agent.client_assertion(issuer)},
        headers={"DPoP": agent.dpop("POST", f"{issuer}/oauth/token")})
    assert polled.status_code == 200 and polled.json()["signed_in"] is True, polled.text
    _, token = await device_to_consent("acct-2")
    r = await live_issuer.post(f"/{slug}/consent", data={"_csrf_token": token, "decision": "deny"})
    assert r.status_code == 200 and "denied" in r.text.lower(), r.text
    _, token = await device_to_consent("acct-1")  # signed in to this agent already: a step-up
    r = await live_issuer.post(f"/{slug}/consent", data={"_csrf_token": token, "decision": "deny"})
    assert r.status_code == 200 and "denied" in r.text.lower(), r.text
    op = await add_operation(runtime, tenant_id, kind, client_id=agent.client_id, confirm=True)
    async with runtime.pool.acquire() as conn:
        await ledger.record_outcome(conn, tenant_id, op.id, outcome="succeeded", result={"summary": "Ordered"},
                                    now=runtime.clock())

    await _sign_in(page, email)
    await page.goto("/analytics/funnel?days=7")
    await expect(page.locator("h1")).to_have_text("Agent funnel")
    expected = {"sessions": "3", "prompted": "3", "sign_ins": "1", "abandoned_before_login": "0",
                "abandoned_login": "0", "abandoned_consent": "1", "abandoned_step_up": "1", "proposed": "1",
                "approved": "1", "performed": "1", "failed": "0", "unknown": "0"}
    for row in (page.locator(f"tr[data-agent='{agent.client_id}']"), page.locator("tr[data-agent=total]")):
        for metric, count in expected.items():
            await expect(row.locator(f"td[data-count={metric}]")).to_have_text(count)
    await expect(page.locator("table[data-table=funnel] tbody tr")).to_have_count(2)  # this agent and the total
    abandoned = page.locator("figure[data-chart=funnel-abandoned]")
    await expect(abandoned.locator("[data-count=chart-funnel-abandoned-total]")).to_have_text("2")
    await expect(abandoned.locator("rect.series-step-up")).to_have_count(1)
    await expect(page.locator("th", has_text="Abandoned at step-up")).to_have_count(1)
