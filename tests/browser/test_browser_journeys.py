"""The dashboard's main journeys in a real browser (headless Chromium through Playwright).

Sign up, sign in, add a domain, publish its TXT record (local DNS), verify it with the
htmx button; watch an agent's Session appear in the live list, revoke it; block an agent;
a viewer sees no control that changes anything and a forged POST is refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from frontdoor_core.ids import new_id
from playwright.async_api import expect

from tests.browser.demo_data import seed_demo_month
from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD
from tests.support.agent import TestAgent as Agent  # (not collected as a test class)
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

pytestmark = pytest.mark.browser
BROWSER_ISSUER = "http://127.0.0.1:8001"  # FRONTDOOR_ISSUER_BASE_URL of browser_settings
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


async def _sign_up(page: Any) -> tuple[str, str]:
    slug = unique("br-")
    email = f"{slug}@example.com"
    await page.goto("/signup")
    await page.fill("input[name=organization_name]", "Northwind Traders")
    await page.fill("input[name=slug]", slug)
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", STRONG_PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("#new-api-key")).to_contain_text("fdk_")
    return slug, email


async def _sign_in(page: Any, email: str) -> None:
    await page.goto("/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", STRONG_PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Overview")


async def _tenant_id(db: Any, email: str) -> str:
    return str(await db.fetchval("SELECT tenant_id FROM admins WHERE email = $1", email))


async def _agent(db: Any, tenant_id: str, name: str) -> str:
    client_id = f"https://{unique('agent-')}.example/agent.json"
    await db.execute("INSERT INTO agents (tenant_id, client_id, client_name, first_seen_at, last_seen_at)"
                     " VALUES ($1, $2, $3, now(), now())", tenant_id, client_id, name)
    return client_id


async def test_sign_up_add_a_domain_and_see_it_verified(context: Any, db: Any, dns: LocalDNS) -> None:
    page = await context.new_page()
    _, email = await _sign_up(page)
    await page.click("text=Sign in to the dashboard")
    await _sign_in(page, email)

    domain = f"{unique('shop-')}.example"
    await page.click("nav >> text=Domains")
    await page.fill("input[name=domain]", domain)
    await page.click("text=Add domain")
    await expect(page.locator("p.notice")).to_contain_text("Domain added")
    row = page.locator(f"#domain-{domain.replace('.', '-')}")
    await expect(row.locator(".status")).to_have_text("pending")
    name = (await row.locator("code[id$='-name']").inner_text()).strip()
    value = (await row.locator("code[id$='-value']").inner_text()).strip().strip('"')
    assert name == f"_frontdoor-challenge.{domain}" and value.startswith("frontdoor-verify=")

    dns.set_txt(name, [value])
    try:
        await row.locator("text=Verify now").click()  # htmx swaps the row in place
        await expect(row.locator(".status")).to_have_text("verified")
    finally:
        dns.remove(name)
    await expect(row.locator(f"a[href='/domains/{domain}/poppy.json']")).to_be_visible()
    await page.click("nav >> text=Overview")
    await expect(page.locator("[data-count=domains-verified]")).to_have_text("1")
    if os.environ.get("FRONTDOOR_DOCS_SCREENSHOT"):
        # The docs' picture: this tenant with a month of traffic (sessions, operations, a failing endpoint).
        await seed_demo_month(db, await _tenant_id(db, email))
        await page.reload()
        await expect(page.locator("[data-chart=sessions] g.chart-bar")).to_have_count(30)
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(DOCS_IMG / "overview.png"), full_page=True)


async def test_a_session_appears_live_then_is_revoked_and_an_agent_is_blocked(
    context: Any, db: Any, live_issuer: Any, agent_web: MockWeb,
) -> None:
    page = await context.new_page()
    slug, email = await _sign_up(page)
    api_key = (await page.locator("#new-api-key").inner_text()).strip()
    await _sign_in(page, email)
    issuer = f"{BROWSER_ISSUER}/{slug}"
    # The company's resource server introspects the agent's tokens with its own credential.
    r = await page.request.post("/api/v1/resource-credentials", data={"name": "orders-api"},
                                headers={"Authorization": f"Bearer {api_key}"})
    assert r.status == 201, await r.text()
    credential = (await r.json())["secret"]
    agent = Agent(host=f"{unique('pocket-')}.example", name="Pocket Assistant").publish(agent_web)

    async def start_session(session_id: str | None = None) -> Any:
        extra = {"session_id": session_id} if session_id else {}
        return await live_issuer.post(f"/{slug}/oauth/token", data=agent.token_form(issuer, "user-1", **extra),
                                      headers={"DPoP": agent.dpop("POST", f"{issuer}/oauth/token")})

    async def introspect(token: str) -> dict[str, Any]:
        r = await live_issuer.post(f"/{slug}/oauth/introspect", data={"token": token},
                                   headers={"Authorization": f"Bearer {credential}"})
        assert r.status_code == 200, r.text
        return dict(r.json())

    await page.click("nav >> text=Sessions")
    await expect(page.locator("#session-rows")).to_contain_text("No Sessions match")
    # The agent starts a Session at the real issuer while the page is open: the list's poll brings it in.
    started = await start_session()
    assert started.status_code == 200, started.text
    session_id, token = started.json()["session_id"], started.json()["access_token"]
    assert (await introspect(token))["active"] is True
    row = page.locator(f"tr[data-session='{session_id}']")
    await expect(row).to_contain_text("Pocket Assistant", timeout=8000)

    await row.locator("text=Revoke…").click()
    await expect(page.locator("h1")).to_have_text("Revoke this Session?")
    await page.click("button:has-text('Revoke Session')")
    await expect(page.locator("p.notice")).to_contain_text("Session revoked")
    await expect(page.locator(f"tr[data-session='{session_id}']")).to_have_count(0)
    # The agent's next calls are refused: its token introspects inactive, renewing the Session fails.
    assert await introspect(token) == {"active": False}
    renewed = await start_session(session_id)
    assert renewed.status_code == 400 and renewed.json()["error"] == "invalid_session", renewed.text

    await page.click("nav >> text=Agents")
    await page.locator("tr", has_text="Pocket Assistant").locator("text=Block…").click()
    await expect(page.locator("h1")).to_have_text("Block this agent?")
    await page.click("button:has-text('Block agent')")
    await expect(page.locator("p.notice")).to_contain_text("Agent blocked")
    await expect(page.locator("tr", has_text="Pocket Assistant").locator(".status")).to_have_text("blocked")
    # A blocked agent cannot start a new Session either.
    refused = await start_session()
    assert refused.json()["error"] == "unauthorized_client", refused.text
    await page.click("nav >> text=Audit log")
    await expect(page.locator("main")).to_contain_text("session.revoked")
    await expect(page.locator("main")).to_contain_text("agent.blocked")


async def test_a_viewer_sees_no_controls_and_a_forged_post_is_refused(context: Any, db: Any) -> None:
    from frontdoor_tenancy.credentials.password import hash_password

    owner_page = await context.new_page()
    _, email = await _sign_up(owner_page)
    tenant_id = await _tenant_id(db, email)
    agent = await _agent(db, tenant_id, "Watched Agent")
    viewer = f"{unique('viewer-')}@example.com"
    await db.execute("INSERT INTO admins (tenant_id, id, email, password_hash, role) VALUES ($1, $2, $3, $4, 'viewer')",
                     tenant_id, new_id("adm"), viewer, hash_password(STRONG_PASSWORD))
    await owner_page.close()

    page = await context.new_page()
    await _sign_in(page, viewer)
    await expect(page.locator(".banner")).to_contain_text("You are a viewer")
    for path in ("/domains", "/agents", "/sessions", "/api-keys", "/team", "/resource-credentials", "/settings"):
        await page.goto(path)
        main = page.locator("main")
        await expect(main.locator("form[method=post]")).to_have_count(0)
        await expect(main.locator("a.button")).to_have_count(0)
    await page.goto("/agents")
    await expect(page.locator("main")).to_contain_text("Watched Agent")
    csrf = await page.locator("meta[name=csrf-token]").get_attribute("content")
    r = await page.request.post("/agents/block", form={"client_id": agent, "confirm": "yes"},
                                headers={"x-csrftoken": csrf})
    assert r.status == 403
    assert await db.fetchval("SELECT blocked_at FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             tenant_id, agent) is None
    assert re.search("Not allowed", await r.text())
