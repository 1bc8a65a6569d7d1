"""The agent simulator in a real browser (issue #19 §1 proof): an admin runs it and reads it.

The stack is the scanner journeys' (`test_browser_scanner_funnel`): the real console app over
a real socket (uvicorn), the real issuer app in-process, and a pretend internet (``MockWeb``)
through which the console's SSRF-safe fetcher reaches the company's domain, the issuer and
Northwind, the example company, in-process behind the real sdk and introspecting at the
real issuer (as `tests/integration/console/test_simulator_api_call` wires it). Not a fresh
``make run``: the same apps, with the network replaced, so that nothing leaves loopback.

- A well-configured tenant whose poppy.json lists Northwind's OpenAPI API and which offers
  Device Sign-In through its login page: the admin clicks **Run the simulator**; discovery,
  the signed-out Session and the call to Northwind's first GET operation are green and the
  run waits at the sign-in with the link and user code; a test user signs in (the issuer's
  device page, the company's login handoff, consent) and the page's own htmx poll, at the
  issuer's interval, carries the run through the sign-in, a test operation (confirmed at the
  real ledger, performed by the tenant's perform webhook, its delivery shown), the Account
  Token's revocation and its refusal, all green, without a reload; the run is first in the
  history and its page opens, green.
- A tenant with the wrong domain in its poppy.json: discovery fails with ``domain_mismatch``
  and its doc link, the later steps do not run; the history and the run's page say so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient
from northwind import NorthwindConfig
from northwind import create_app as northwind_app
from playwright.async_api import expect

from tests.browser.test_browser_scanner_funnel import (  # noqa: F401 (the scanner journeys' stack)
    DOCS,
    api,
    issuer_app,
    scan_context,
    scan_site,
    scan_web,
)
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle, sign_up
from tests.integration.console.test_simulator import route_to, wire
from tests.integration.console.test_simulator_sign_in import (
    offer_device_sign_in,
    perform_webhook,
    route_prefix,
    user_signs_in,
)
from tests.integration.issuer.test_pap10_publish_check import publish_all
from tests.integration.ledger.conftest import LEDGER
from tests.integration.northwind.test_account_page import forwarding_client
from tests.integration.signin.conftest import configure, resource_credential
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

pytestmark = pytest.mark.browser
login_keys: dict[str, Any] = {}  # the key each tenant's pretend login page signs its answers with
RAN = ("discovery", "session", "api", "signin", "operation", "revoke", "refused")  # the steps a green run passes


@pytest.fixture(scope="session")
async def ledger_app(settings: Settings, migrated: str, clock: ShiftableClock, scan_web: MockWeb  # noqa: F811
                     ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The real ledger app in-process, its perform webhooks sent through the same pretend internet."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=scan_web))
    async with AsyncTestClient(app, base_url=LEDGER) as client:
        yield client


@pytest.fixture
async def northwind(api: AsyncTestClient[Any], issuer_app: AsyncTestClient[Any], dns: LocalDNS,  # noqa: F811
                    scan_web: MockWeb, clock: ShiftableClock, ledger_app: AsyncTestClient[Any],  # noqa: F811
                    ) -> AsyncIterator[tuple[TenantHandle, str]]:
    """A tenant whose verified domain is Northwind's, its OpenAPI API listed in poppy.json; (tenant, origin)."""
    tenant = await sign_up(api)
    domain = await verified_domain(api, tenant, dns)
    origin = f"https://{domain}"
    await configure(api, tenant, apis=[{"type": "openapi", "url": f"{origin}/openapi.json",
                                        "description": "Products and orders"}])
    login_keys[tenant.id] = await offer_device_sign_in(api, tenant)
    await perform_webhook(api, tenant, scan_web)  # an operation kind and its perform webhook (a test receiver)
    route_prefix(scan_web, ledger_app, f"{LEDGER}/{tenant.slug}/operations/")
    await publish_all(api, issuer_app, tenant, scan_web, domain)
    await wire(scan_web, api, issuer_app, tenant)
    credential = await resource_credential(api, tenant)
    doc = (await api.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    async with forwarding_client(issuer_app) as to_issuer:
        app = northwind_app(NorthwindConfig(issuer=tenant.issuer, credential=credential, public_url=origin, poppy=doc,
                                            http_client=to_issuer, clock=clock))
        async with AsyncTestClient(app=app, base_url=origin) as company:
            for path in ("/openapi.json", "/api/products", "/api/orders", "/mcp"):
                route_to(scan_web, company, origin + path)
            yield tenant, origin


async def _admin(context: Any, email: str) -> Any:
    """A browser signed in to the console as the tenant's owner."""
    page = await context.new_page()
    await page.goto("/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", STRONG_PASSWORD)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Overview")
    return page


async def _run(page: Any, *, timeout: float = 5000) -> str:
    """Open the simulator, click Run, and answer the run's ID (its link under the run, once it is over)."""
    await page.goto("/simulator")
    await expect(page.locator("h1")).to_have_text("Agent simulator")
    await page.get_by_role("button", name="Run the simulator").click()
    return await _run_id(page, timeout=timeout)


async def _run_id(page: Any, *, timeout: float = 5000) -> str:
    link = page.locator("a[data-run-link]")
    await expect(link).to_be_visible(timeout=timeout)
    await expect(link).to_be_visible()
    return str(await link.inner_text()).strip()


async def test_an_admin_runs_the_simulator_against_northwind_and_every_step_is_green(
    scan_context: Any, northwind: tuple[TenantHandle, str], issuer_app: AsyncTestClient[Any],  # noqa: F811
) -> None:
    tenant, origin = northwind
    page = await _admin(scan_context, tenant.email)
    await page.goto("/simulator")
    # The operation step calls the real perform webhook: off unless ticked, and the form says where it goes.
    include = page.get_by_label("Include an operation")
    await expect(include).not_to_be_checked()
    await expect(page.locator("label", has=include)).to_contain_text(
        f"sends a real perform webhook to https://{tenant.slug}.shop.example/webhooks/frontdoor")
    await include.check()
    await page.get_by_role("button", name="Run the simulator").click()
    run = page.locator("section[aria-labelledby=sim-run]")
    prompt = run.locator("[data-sign-in-prompt]")
    await expect(prompt).to_be_visible()
    await expect(prompt.locator("a[data-verification-link]")).to_have_attribute("target", "_blank")
    code = str(await prompt.locator("[data-user-code]").inner_text()).strip()
    await expect(run.locator("article[data-step=signin]")).to_have_attribute("data-status", "informational")
    await expect(run.locator("article[data-step=revoke]")).to_have_attribute("data-status", "not_run")
    # The test user signs in at the company's login page (in another "tab": the issuer, in-process).
    await user_signs_in(issuer_app, tenant, code, login_keys[tenant.id], "acct_browser_test")
    # No click: the page's htmx poll (every interval, 5 s) carries the run to its end.
    run_id = await _run_id(page, timeout=30_000)
    for key in RAN:
        step = run.locator(f"article[data-step={key}]")
        await expect(step).to_have_attribute("data-status", "passed")
        await expect(step.locator("h3 .ok")).to_have_text("passed")
    await expect(run.locator("[data-sign-in-prompt]")).to_have_count(0)
    await expect(run.locator(".bad")).to_have_count(0)
    await expect(run.locator(".finding")).to_have_count(0)
    # The operation: proposed, confirmed at the ledger, performed by the webhook; its delivery shown.
    operation = run.locator("article[data-step=operation]")
    await expect(operation).to_contain_text("your perform webhook answered succeeded")
    await expect(operation.locator("details.exchange summary", has_text="/webhooks/frontdoor")).to_contain_text("200")
    await expect(run.locator("article[data-step=api]")).to_contain_text(f"GET {origin}/api/products answered 200")
    # Each exchange opens to show what went over the wire, the Session Token redacted.
    call = run.locator("article[data-step=api] details.exchange", has_text=f"GET {origin}/api/products")
    await call.locator("summary").click()
    await expect(call.locator("pre").first).to_contain_text("Authorization: DPoP [redacted]")

    # The run is first in the history; its page opens and shows the same steps, green.
    latest = page.locator("table[data-table=simulator-runs] tbody tr").first
    await expect(latest).to_have_attribute("data-run", run_id)
    await expect(latest).to_contain_text("passed")
    await expect(latest).to_contain_text(tenant.email)
    await latest.locator(f"a[href='/simulator-runs/{run_id}']").click()
    await expect(page).to_have_url(f"{page.url.split('/simulator')[0]}/simulator-runs/{run_id}")
    await expect(page.locator("h1")).to_contain_text(run_id)
    await expect(page.locator("[data-run-ok]")).to_have_attribute("data-run-ok", "yes")
    for key in RAN:
        await expect(page.locator(f"article[data-step={key}]")).to_have_attribute("data-status", "passed")


async def test_a_wrong_domain_in_poppy_json_shows_domain_mismatch_with_its_doc(
    scan_context: Any, api: AsyncTestClient[Any], issuer_app: AsyncTestClient[Any],  # noqa: F811
    dns: LocalDNS, scan_web: MockWeb,  # noqa: F811
) -> None:
    tenant = await sign_up(api)
    domain = await verified_domain(api, tenant, dns)
    await publish_all(api, issuer_app, tenant, scan_web, domain)
    doc = (await api.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    doc["organization"]["domain"] = "www." + domain  # the wrong domain in poppy.json
    scan_web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
    await wire(scan_web, api, issuer_app, tenant)

    page = await _admin(scan_context, tenant.email)
    run_id = await _run(page)
    run = page.locator("section[aria-labelledby=sim-run]")
    discovery = run.locator("article[data-step=discovery]")
    await expect(discovery).to_have_attribute("data-status", "failed")
    finding = discovery.locator(".finding[data-code=domain_mismatch]")
    await expect(finding).to_be_visible()
    await expect(finding.locator("a[data-doc]")).to_have_attribute("href", DOCS + "poppy-json.md#publish-check-findings")
    await expect(finding.locator("a", has_text="Open the setting")).to_have_attribute("href", "/domains")
    for key in ("session", "api", "signin", "revoke", "refused"):
        await expect(run.locator(f"article[data-step={key}]")).to_have_attribute("data-status", "not_run")

    latest = page.locator("table[data-table=simulator-runs] tbody tr").first
    await expect(latest).to_have_attribute("data-run", run_id)
    await expect(latest).to_contain_text("failed")
    await expect(latest.locator("code", has_text="domain_mismatch")).to_be_visible()
    await latest.locator(f"a[href='/simulator-runs/{run_id}']").click()
    await expect(page.locator("[data-run-ok]")).to_have_attribute("data-run-ok", "no")
    stored = page.locator("article[data-step=discovery] .finding[data-code=domain_mismatch]")
    await expect(stored.locator("a[data-doc]")).to_have_attribute("href", DOCS + "poppy-json.md#publish-check-findings")
