"""The agent simulator run green against Northwind from a fresh ``make run`` (issue #19 §1 proof).

A fresh ``make run`` (`tests.support.devstack`, on free ports, its own embedded PostgreSQL
and Redis, as `test_stack` starts it): the demo tenant ``demo`` is seeded with the verified
domain ``northwind.example`` and Northwind, the example company, is started for it. The
simulator's discovery fetches ``https://northwind.example/.well-known/poppy.json``, which
nothing serves on a plain ``make run`` (``dns_error``), and the publish check wants every URL
in ``poppy.json`` and the issuer metadata on ``https://`` (PAP-3-05). So, as a developer
would put a TLS proxy in front (docs/dashboard.md, "The simulator against the demo"):

- `tests.support.tls_front` gives ``northwind.example`` (Northwind's port), the issuer
  (`ISSUER`) and the ledger (`LEDGER`) each a loopback address on port 443 with a throwaway
  CA, ends TLS there and proxies the bytes on to the service's port;
- ``make run`` gets ``FRONTDOOR_ISSUER_BASE_URL`` / ``FRONTDOOR_LEDGER_BASE_URL`` on those
  names and ``FRONTDOOR_EXAMPLE_PUBLIC_URL=https://northwind.example`` (the demo tenant's APIs,
  login page and perform webhook are seeded with it); its processes resolve the names and
  trust the CA through ``tests/support/stack_site`` (`TlsFront.stack_env`; ``SSL_CERT_FILE``
  for Northwind's httpx), the names' /24 in ``FRONTDOOR_OUTBOUND_ALLOWLIST`` and
  ``FRONTDOOR_WEBHOOK_ALLOWLIST`` (a name resolving to loopback is refused otherwise, even in
  dev); the console stays on its plain loopback URL;
- Chromium maps the names to their addresses (``--host-resolver-rules``) and accepts the
  test CA's certificates.

The journey, in headless Chromium: the demo admin signs in to the dashboard with the
credentials ``make run`` prints and clicks **Run the simulator**; discovery, the signed-out
Session and the call to Northwind's first API are green and the run waits at Device Sign-In;
the admin opens the verification link in a new tab and signs in at Northwind's login page as
``ada@northwind.example`` (password from the banner) and allows; the page's own poll carries
the run through the operation (confirmed at the ledger, performed by Northwind's perform
webhook through the deliverer), the revocation and the refusal, every step green. Then what
was persisted: the run in ``simulator_runs`` (ok), the operation ``succeeded`` under the
simulator's ``client_id`` with its perform message delivered, the sign-in revoked.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from playwright.async_api import async_playwright, expect

from tests.support.devstack import Devstack, free_port, start_devstack
from tests.support.tls_front import TlsFront

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(180, func_only=True)]

CHROMIUM = Path("/usr/bin/chromium")
DOMAIN = "northwind.example"  # the demo tenant's verified domain (frontdoor_devstack.seed.NORTHWIND_DOMAIN)
#: Frontdoor's issuer on Northwind's own site: ``make run`` is dev, where the issuer's flow cookie is
#: ``SameSite=Lax`` (issuer and company share 127.0.0.1 there), so Northwind's login handoff, a form
#: POST to the issuer, carries it only from the same site (`frontdoor_issuer.http.sign_in_pages.flow_cookie`).
ISSUER = "auth.northwind.example"
LEDGER = "ledger.frontdoor.test"
RAN = ("discovery", "session", "api", "signin", "operation", "revoke", "refused")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@dataclass
class World:
    run: Devstack
    front: TlsFront
    console: str
    issuer: str
    northwind: str

    def banner(self, pattern: str) -> str:
        """What ``make run`` printed after ``pattern`` (a credential, a password)."""
        match = re.search(pattern + r"\s+(\S+)", self.run.text())
        assert match, f"make run did not print {pattern!r}:\n{self.run.text()[-3000:]}"
        return match.group(1)

    @property
    def database_url(self) -> str:
        """The embedded PostgreSQL ``make run`` started (its Unix socket in the data directory)."""
        return f"postgresql://postgres@/frontdoor?host={self.run.data_dir / 'postgres' / 'run'}"


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    if not CHROMIUM.exists():
        pytest.skip("no system Chromium at /usr/bin/chromium (apt-get install -y chromium; .ci/run does)")
    data_dir = Path(tempfile.mkdtemp(prefix="fdsim-"))
    os.chmod(data_dir, 0o711)
    ports = {name: free_port() for name in ("console", "issuer", "ledger", "example")}
    front = TlsFront(
        data_dir / "tls",
        proxied={ISSUER: ports["issuer"], LEDGER: ports["ledger"], DOMAIN: ports["example"]},
        served=(),
    )
    run: Devstack | None = None
    try:
        front.start()
        run = start_devstack(
            data_dir,
            {  # no FRONTDOOR_ENV: `make run` sets dev itself
                **{f"FRONTDOOR_{name.upper()}_PORT": str(port) for name, port in ports.items()},
                "FRONTDOOR_ISSUER_BASE_URL": f"https://{ISSUER}",
                "FRONTDOOR_LEDGER_BASE_URL": f"https://{LEDGER}",
                "FRONTDOOR_EXAMPLE_PUBLIC_URL": f"https://{DOMAIN}",
                "FRONTDOOR_LOG_LEVEL": "warning",
                "FRONTDOOR_OUTBOUND_ALLOWLIST": front.cidr,
                "FRONTDOOR_WEBHOOK_ALLOWLIST": front.cidr,
                # httpx in the stack's processes (the example company's sdk) reads SSL_CERT_FILE before certifi.
                **front.stack_env(),
                "SSL_CERT_FILE": str(front.bundle),
            },
            timeout=120,
        )
        yield World(run, front, f"http://127.0.0.1:{ports['console']}", f"https://{ISSUER}/demo", f"https://{DOMAIN}")
    finally:
        if run is not None:
            run.stop()  # SIGTERM: make run stops its embedded PostgreSQL and Redis
        front.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


async def test_the_simulator_runs_green_against_northwind_from_a_fresh_make_run(world: World) -> None:
    email, password = world.banner(r"admin email"), world.banner(r"admin password")
    ada_password = world.banner(r"ada@northwind\.example\s+password")
    assert re.search(rf"example company Northwind\s+https://{re.escape(DOMAIN)}\s", world.run.text())
    saved = json.loads((world.run.data_dir / "demo-credentials.json").read_text())
    assert (saved["email"], saved["password"]) == (email, password)
    # The name is reachable as an agent reaches it: TLS for northwind.example, Northwind's poppy.json behind.
    async with world.front.client() as http:
        served = await http.get(f"https://{DOMAIN}/.well-known/poppy.json")
    assert served.status_code == 200, served.text
    assert served.json()["organization"]["domain"] == DOMAIN

    # The browser reaches the names at their loopback addresses too (Chromium's resolver rules).
    rules = ", ".join(f"MAP {name} {ip}" for name, ip in world.front.hosts.items())
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--host-resolver-rules={rules}"],
        )
        # The names' certificates come from the test's throwaway CA (the stack's processes trust
        # it through stack_site; the browser is told to accept them).
        context = await browser.new_context(
            base_url=world.console, viewport={"width": 1280, "height": 860}, ignore_https_errors=True
        )
        context.set_default_timeout(10_000)
        try:
            await _journey(context, world, email, password, ada_password)
        except BaseException:
            ARTIFACTS.mkdir(exist_ok=True)
            for i, page in enumerate(context.pages):
                with contextlib.suppress(Exception):
                    print(f"--- page {i} {page.url}:\n" + await page.locator("main").inner_text(timeout=5000))
                with contextlib.suppress(Exception):
                    await page.screenshot(
                        path=str(ARTIFACTS / f"simulator-make-run-{i}.png"), full_page=True, timeout=5000
                    )
            for log in sorted((world.run.data_dir / "logs").glob("*.log")):
                print(f"--- {log.name}:\n" + log.read_text(errors="replace")[-3000:])
            raise
        finally:
            await context.close()
            await browser.close()
    await _persisted(world, email)


async def _journey(context: Any, world: World, email: str, password: str, ada_password: str) -> None:
    page = await context.new_page()
    await page.goto("/login")
    await page.fill("input[name=email]", email)
    await page.fill("input[name=password]", password)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("Overview")

    await page.goto("/simulator")
    await expect(page.locator("h1")).to_have_text("Agent simulator")
    client_id = f"{world.console}/simulator/demo/agent.json"
    await expect(page.locator("[data-simulator-client-id]")).to_have_text(client_id)
    include = page.get_by_label("Include an operation")  # off by default: it calls Northwind's real perform webhook
    await expect(page.locator("label", has=include)).to_contain_text(
        f"sends a real perform webhook to {world.northwind}/webhooks/frontdoor")
    await include.check()
    await page.get_by_role("button", name="Run the simulator").click()
    run = page.locator("section[aria-labelledby=sim-run]")
    for key in ("discovery", "session", "api"):
        await expect(run.locator(f"article[data-step={key}]")).to_have_attribute("data-status", "passed")
    await expect(run.locator("article[data-step=discovery]")).to_contain_text(f"{DOMAIN}: every document agrees.")
    await expect(
        run.locator(
            "article[data-step=discovery] details.exchange summary", has_text=f"https://{DOMAIN}/.well-known/poppy.json"
        )
    ).to_contain_text("200")
    prompt = run.locator("[data-sign-in-prompt]")
    await expect(prompt).to_be_visible()
    await expect(prompt.locator("[data-sign-in-company]")).to_contain_text(DOMAIN)
    await expect(run.locator("article[data-step=signin]")).to_have_attribute("data-status", "informational")
    code = str(await prompt.locator("[data-user-code]").inner_text()).strip()
    link = prompt.locator("a[data-verification-link]")
    await expect(link).to_have_attribute("target", "_blank")

    # The admin opens the link in a new tab and signs in at Northwind's login page as a test user.
    async with context.expect_page() as opened:
        await link.click()
    tab = await opened.value
    await expect(tab.locator("input[name=user_code]")).to_have_value(code)
    await tab.click("button:has-text('Continue')")
    await expect(tab).to_have_url(re.compile(rf"^{re.escape(world.northwind)}/login\?request="))
    await expect(tab.locator("main")).to_contain_text("Frontdoor agent simulator")
    await tab.fill("input[name=email]", "ada@northwind.example")
    await tab.fill("input[name=password]", ada_password)
    await tab.click("button:has-text('Sign in')")
    await expect(tab).to_have_url(f"{world.issuer}/consent")  # Northwind's handoff, by its script
    await expect(tab.locator("main")).to_contain_text(f"code {code}")
    await tab.click("button:has-text('Allow')")
    await expect(tab.locator("h1")).to_have_text("You're connected")
    await tab.close()

    # No click: the simulator page's own poll (at the issuer's interval) carries the run to its end.
    await expect(page.locator("a[data-run-link]")).to_be_visible(timeout=40_000)
    for key in RAN:
        step = run.locator(f"article[data-step={key}]")
        await expect(step).to_have_attribute("data-status", "passed")
    await expect(run.locator(".finding")).to_have_count(0)
    await expect(run.locator("article[data-step=api]")).to_contain_text(f"{world.northwind}/api/products answered 200")
    operation = run.locator("article[data-step=operation]")
    await expect(operation).to_contain_text("your perform webhook answered succeeded")
    await expect(
        operation.locator("details.exchange summary", has_text=f"{world.northwind}/webhooks/frontdoor")
    ).to_contain_text("200")
    await expect(run.locator("article[data-step=refused]")).to_contain_text("400 invalid_grant")


async def _persisted(world: World, email: str) -> None:
    client_id = f"{world.console}/simulator/demo/agent.json"
    conn = await asyncpg.connect(world.database_url)
    try:
        tenant = await conn.fetchval("SELECT id FROM tenants WHERE slug = 'demo'")
        runs = await conn.fetch("SELECT ok, member_email, steps FROM simulator_runs WHERE tenant_id = $1", tenant)
        assert [(r["ok"], r["member_email"]) for r in runs] == [(True, email)]
        steps = json.loads(runs[0]["steps"]) if isinstance(runs[0]["steps"], str) else runs[0]["steps"]
        assert [s["key"] for s in steps] == list(RAN)
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM simulator_client_ids WHERE tenant_id = $1 AND client_id = $2", tenant, client_id
            )
            == 1
        )
        ops = await conn.fetch(
            "SELECT id, state, client_id, account_id, input, approved_by, perform_message_id"
            " FROM operations WHERE tenant_id = $1",
            tenant,
        )
        assert len(ops) == 1, ops
        op = ops[0]
        assert (op["state"], op["client_id"], op["account_id"], op["approved_by"]) == (
            "succeeded",
            client_id,
            "acct_ada",
            "user",
        )
        assert json.loads(op["input"])["simulator"] is True
        message = await conn.fetchrow(
            "SELECT state, purpose, (SELECT count(*) FROM webhook_attempts a WHERE"
            " a.tenant_id = m.tenant_id AND a.message_id = m.id AND a.response_status = 200)"
            " AS ok FROM webhook_messages m WHERE tenant_id = $1 AND id = $2",
            tenant,
            op["perform_message_id"],
        )
        assert (message["state"], message["purpose"], message["ok"]) == ("delivered", "perform", 1)
        sign_ins = await conn.fetch(
            "SELECT account_id, type, revoked_at FROM sign_ins WHERE tenant_id = $1 AND client_id = $2",
            tenant,
            client_id,
        )
        assert [(s["account_id"], s["type"], s["revoked_at"] is not None) for s in sign_ins] == [
            ("acct_ada", "device", True)
        ]
    finally:
        await conn.close()
