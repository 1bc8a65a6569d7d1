"""The agent simulator (issue #19 §1) at the wire level: a real issuer and console, the
simulator's every request over HTTP through the SSRF-safe fetcher (the suite's MockWeb
carries it to the issuer's and console's ASGI apps, as the network would).

Covers: a run for a well-configured tenant without Device Sign-In (discovery, signed-out
Session PAP-4.5-01, the sign-in step's finding; the signed-in steps are in
``test_simulator_sign_in.py``), the publish check's finding codes for a
wrong or missing poppy.json, no secret in the rendered page, viewers read-only, and
another tenant's admin never seeing or running it.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_cli_reencrypt_secrets import fresh  # noqa: F401 (a database of its own)
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.integration.issuer.test_pap10_publish_check import publish_all
from tests.integration.test_issuer_discovery import BASE, verified_domain
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

CONSOLE = "https://console.frontdoor.test"


def route_to(web: MockWeb, client: AsyncTestClient[Any], url: str) -> None:
    """Let the fetcher reach ``url`` on the in-process app behind ``client``."""

    async def forward(request: httpx.Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length", "cookie")}
        r = await client.request(request.method, request.url.path, content=request.content, headers=headers,
                                 cookies={})
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    web.handle(url, forward)


async def wire(web: MockWeb, console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle) -> None:
    for path in ("oauth/token", "oauth/revoke", "oauth/device", "feedback"):
        route_to(web, issuer, f"{BASE}/{t.slug}/{path}")
    # The console's public CIMD and JWKS, as it serves them, published where the issuer fetches them
    # (the console is not re-entered while it handles the run).
    for name in ("agent.json", "jwks.json"):
        r = await console.get(f"/simulator/{t.slug}/{name}")
        assert r.status_code == 200 and r.headers["cache-control"] == "max-age=300"
        web.serve(f"{CONSOLE}/simulator/{t.slug}/{name}", json=r.json(), headers={"cache-control": "max-age=300"})


def steps(page: str) -> dict[str, str]:
    return dict(re.findall(r'data-step="(\w+)" data-ok="(\w+)"', page))


def statuses(page: str) -> dict[str, str]:
    """Each step's outcome as the page names it (passed, failed, informational, not_run)."""
    return dict(re.findall(r'data-step="(\w+)" data-ok="\w+" data-status="(\w+)"', page))


def codes(page: str) -> list[str]:
    return re.findall(r'class="finding" data-code="([\w-]+)"', page)


async def run(console: AsyncTestClient[Any], t: TenantHandle, *, include_operation: bool = False) -> httpx.Response:
    """Sign in as ``t``'s owner and run the simulator (ticking "Include an operation" when asked)."""
    csrf = await sign_in(console, t.email)
    form = {"_csrf_token": csrf, **({"include_operation": "yes"} if include_operation else {})}
    return await console.post("/simulator", data=form)


async def test_a_well_configured_tenant_runs_green_and_no_secret_is_shown(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    db: Any,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await publish_all(console, issuer, tenant, web, domain)
    await wire(web, console, issuer, tenant)
    r = await run(console, tenant)
    assert r.status_code == 200, r.text
    ran = steps(r.text)
    assert {k: ran[k] for k in ("discovery", "session")} == {"discovery": "yes", "session": "yes"}, codes(r.text)
    # Without Device Sign-In offered the run ends at the sign-in step: informational, with the finding
    # that says how to turn it on (the signed-in steps are in test_simulator_sign_in.py).
    assert statuses(r.text)["signin"] == "informational" and codes(r.text) == ["sign_in_not_offered"]
    assert statuses(r.text)["revoke"] == "not_run"
    assert f"{BASE}/{tenant.slug}/oauth/token" in r.text
    # The issuer really fetched the simulator's CIMD from the console, over HTTP.
    client_id = f"{CONSOLE}/simulator/{tenant.slug}/agent.json"
    assert any(str(q.url) == client_id for q in web.requests)
    session = await db.fetchrow("SELECT client_id FROM pap_sessions WHERE tenant_id = $1", tenant.id)
    assert session is not None and session["client_id"] == client_id
    # Secrets: the Session Token, the assertions and proofs the agent sent, the private key.
    sent = [q for q in web.requests if q.method == "POST"]
    secrets = [q.headers["dpop"] for q in sent if "dpop" in q.headers]
    secrets += [q.headers["authorization"].split(" ", 1)[1] for q in sent if "authorization" in q.headers]
    form = httpx.QueryParams(next(q for q in sent if q.url.path.endswith("/oauth/token")).content.decode())
    secrets += [form["client_assertion"], form["assertion"]]
    row = await db.fetchrow("SELECT key_ciphertext FROM simulator_agents WHERE tenant_id = $1", tenant.id)
    assert row is not None
    assert len(secrets) >= 3
    for s in secrets:
        assert s not in r.text
        assert s.rsplit(".", 1)[-1] not in r.text  # no signature either
    assert '"d"' not in r.text and '[redacted]' in r.text
    jwks = (await console.get(f"/simulator/{tenant.slug}/jwks.json")).json()
    assert all("d" not in k for k in jwks["keys"])


async def test_a_wrong_domain_in_poppy_json_gives_the_publish_check_code(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await publish_all(console, issuer, tenant, web, domain)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    doc["organization"]["domain"] = "elsewhere.example.com"
    web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
    await wire(web, console, issuer, tenant)
    r = await run(console, tenant)
    assert r.status_code == 200
    found = codes(r.text)
    assert found, r.text
    report = (await console.post(f"/api/v1/domains/{domain}/publish-check", headers=tenant.auth)).json()
    assert found == [f["code"] for f in report["findings"]]  # the same codes as the publish check
    assert steps(r.text) == {"discovery": "no", "session": "skipped", "api": "skipped", "signin": "skipped",
                             "operation": "skipped", "revoke": "skipped", "refused": "skipped"}
    assert 'href="/domains"' in r.text and "poppy-json.md" in r.text


async def test_no_published_poppy_json_is_not_found(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
) -> None:
    await verified_domain(console, tenant, dns)
    await wire(web, console, issuer, tenant)
    r = await run(console, tenant)
    assert codes(r.text) == ["not_found"] and steps(r.text)["discovery"] == "no"


async def test_viewers_read_and_other_tenants_never_see_or_run_it(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, web: MockWeb, db: Any,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await publish_all(console, issuer, tenant, web, domain)
    await wire(web, console, issuer, tenant)
    viewer = await add_admin(db, tenant, "viewer")
    csrf = await sign_in(console, viewer)
    page = await console.get("/simulator")
    assert page.status_code == 200 and "Run the simulator" not in page.text
    assert (await console.post("/simulator", data={"_csrf_token": csrf})).status_code == 403
    # The other tenant's admin: its own simulator only, never this tenant's run or identity.
    r = await run(console, other_tenant)
    assert r.status_code == 200
    assert domain not in r.text and f"/simulator/{tenant.slug}/" not in r.text
    assert codes(r.text) == ["no_domain"]
    assert await db.fetchval("SELECT count(*) FROM pap_sessions WHERE tenant_id = $1", tenant.id) == 0


async def test_kek_rotation_reencrypts_the_simulator_keys(fresh: Any) -> None:  # noqa: F811
    """``reencrypt-secrets`` moves the simulator agent's key to the current KEK (runbook: KEK rotation)."""
    from datetime import UTC, datetime

    from frontdoor_console.simulator.identity import load_identity, reencrypt_simulator_keys
    from frontdoor_tenancy.credentials import DecryptionError, Kek, generate_kek_value

    old, new = generate_kek_value(), generate_kek_value()
    async with fresh.pool.acquire() as conn:
        await conn.execute("INSERT INTO tenants (id, slug, organization_name) VALUES ('ten_sim', 'sim-rot', 'Sim')")
        made = await load_identity(conn, Kek.from_env_value(old), "ten_sim", "sim-rot",
                                   console_base_url="https://console.test", now=datetime.now(UTC))
    both = Kek.from_env_value(f"{new},{old}")
    assert (await reencrypt_simulator_keys(fresh.pool, both, dry_run=True)).reencrypted == 1
    done = await reencrypt_simulator_keys(fresh.pool, both)
    assert done.reencrypted == 1 and done.current == 0 and not done.unreadable
    assert (await reencrypt_simulator_keys(fresh.pool, both)).current == 1  # idempotent
    async with fresh.pool.acquire() as conn:
        again = await load_identity(conn, Kek.from_env_value(new), "ten_sim", "sim-rot",
                                    console_base_url="https://console.test", now=datetime.now(UTC))
        assert again.kid == made.kid  # the same key, now under the new KEK only
        with pytest.raises(DecryptionError):
            await load_identity(conn, Kek.from_env_value(old), "ten_sim", "sim-rot",
                                console_base_url="https://console.test", now=datetime.now(UTC))
