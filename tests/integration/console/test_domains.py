"""Domains proven by DNS, end to end over the management API, a real DNS server,
PostgreSQL and the scheduled check."""

from __future__ import annotations

from typing import Any

from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.domain_claims import policy_from, run_due_checks
from frontdoor_tenancy.domains import TxtResolver
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS


def new_domain() -> str:
    return f"{unique('shop-')}.example.com"


async def scheduled_check(runtime: Runtime, dns: LocalDNS, clock: ShiftableClock) -> None:
    s = runtime.settings
    await run_due_checks(
        runtime.pool, lookup=TxtResolver(dns.nameservers, lifetime=1.0), now=clock(),
        policy=policy_from(pending_window=s.domain_pending_window, pending_recheck=s.domain_pending_recheck,
                           recheck=s.domain_recheck_interval, grace=s.domain_grace_period),
    )


async def add(console: AsyncTestClient[Any], t: TenantHandle, domain: str) -> dict[str, Any]:
    r = await console.post("/api/v1/domains", json={"domain": domain}, headers=t.auth)
    assert r.status_code == 201, r.text
    return r.json()


async def status_of(console: AsyncTestClient[Any], t: TenantHandle, domain: str) -> dict[str, Any]:
    r = await console.get(f"/api/v1/domains/{domain}", headers=t.auth)
    assert r.status_code == 200, r.text
    return r.json()


async def test_add_domain_answers_the_txt_record(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    domain = new_domain()
    body = await add(console, tenant, "  " + domain.upper() + ".")
    assert body["domain"] == domain
    assert body["status"] == "pending"
    assert body["txt"]["name"] == f"_frontdoor-challenge.{domain}"
    value = body["txt"]["value"]
    assert value.startswith("frontdoor-verify=")
    assert len(value.split("=", 1)[1]) >= 26  # >= 128 bits of base32
    again = await console.post("/api/v1/domains", json={"domain": domain}, headers=tenant.auth)
    assert again.status_code == 409
    assert again.json()["code"] == "domain_exists"
    other = await add(console, tenant, new_domain())
    assert other["txt"]["value"] != value  # unique per claim
    listed = (await console.get("/api/v1/domains", headers=tenant.auth)).json()["data"]
    assert {d["domain"] for d in listed} >= {domain, other["domain"]}


async def test_domain_input_is_refused_clearly(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    for bad in ("127.0.0.1", "[::1]", "localhost", "co.uk", "github.io", "shop.example.com:443",
                "shop.example.com/path", "*.example.com", "https://shop.example.com", "a" * 300 + ".com", "com"):
        r = await console.post("/api/v1/domains", json={"domain": bad}, headers=tenant.auth)
        assert r.status_code == 422, bad
        assert r.json()["code"].startswith("invalid_domain."), bad
        assert "domain" in r.json()["errors"]


async def test_idn_domain_is_stored_as_a_labels(console: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    label = unique("bücher-")
    body = await add(console, tenant, f"{label}.example")
    assert body["domain"].startswith("xn--")
    assert body["domain"].endswith(".example")


async def test_full_dns_lifecycle(console: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
                                  runtime: Runtime, clock: ShiftableClock, db: Any) -> None:
    """pending → verified → record removed → (grace) → suspended → record back → verified."""
    domain = new_domain()
    claim = await add(console, tenant, domain)
    name, value = claim["txt"]["name"], claim["txt"]["value"]

    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.status_code == 200
    assert r.json()["status"] == "pending"
    assert r.json()["last_check_result"].startswith("absent")

    # Other TXT records at the name, and the value split into several character-strings.
    dns.set_txt(name, ["google-site-verification=abc", [value[:10], value[10:]]])
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.json()["status"] == "verified", r.json()
    assert r.json()["verified_at"]

    dns.remove(name)
    clock.advance(days=1, minutes=1)
    await scheduled_check(runtime, dns, clock)
    state = await status_of(console, tenant, domain)
    assert state["status"] == "verified"  # within the grace period
    assert state["missing_since"] is not None

    clock.advance(hours=72)
    await scheduled_check(runtime, dns, clock)
    state = await status_of(console, tenant, domain)
    assert state["status"] == "suspended"

    dns.set_txt(name, [value])
    clock.advance(days=1, minutes=1)
    await scheduled_check(runtime, dns, clock)
    state = await status_of(console, tenant, domain)
    assert state["status"] == "verified"
    assert state["missing_since"] is None

    actions = [r["action"] for r in await db.fetch(
        "SELECT action FROM audit_log WHERE tenant_id = $1 AND target_id = $2 ORDER BY id", tenant.id, domain)]
    assert actions == ["domain.added", "domain.verified", "domain.record_missing", "domain.suspended",
                       "domain.reverified"]
    dns.remove(name)


async def test_dns_errors_never_change_state(console: AsyncTestClient[Any], tenant: TenantHandle,
                                             dns: LocalDNS) -> None:
    domain = new_domain()
    claim = await add(console, tenant, domain)
    name = claim["txt"]["name"]
    dns.set_txt(name, [claim["txt"]["value"]])
    assert (await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)).json()["status"] == "verified"
    dns.fail(name, "servfail")
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.status_code == 200
    assert r.json()["status"] == "verified"
    assert r.json()["missing_since"] is None
    assert r.json()["last_check_result"] == "lookup_error:servfail"
    dns.fail(name, None)
    dns.remove(name)


async def test_a_domain_is_verified_by_one_tenant_at_a_time(
    console: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle, dns: LocalDNS
) -> None:
    domain = new_domain()
    a = await add(console, tenant, domain)
    b = await add(console, other_tenant, domain)
    assert a["txt"]["value"] != b["txt"]["value"]
    name = a["txt"]["name"]
    dns.set_txt(name, [a["txt"]["value"], b["txt"]["value"]])
    assert (await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)).json()["status"] == "verified"
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=other_tenant.auth)
    assert r.json()["status"] == "pending"
    assert r.json()["last_check_result"] == "held_by_another_tenant"
    # Once A lets go, B's claim can verify.
    assert (await console.delete(f"/api/v1/domains/{domain}", headers=tenant.auth)).status_code == 204
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=other_tenant.auth)
    assert r.json()["status"] == "verified"
    dns.remove(name)


async def test_domains_are_tenant_scoped(console: AsyncTestClient[Any], tenant: TenantHandle,
                                         other_tenant: TenantHandle, db: Any) -> None:
    domain = new_domain()
    await add(console, tenant, domain)
    for method, path in (("GET", f"/api/v1/domains/{domain}"), ("DELETE", f"/api/v1/domains/{domain}"),
                         ("POST", f"/api/v1/domains/{domain}/verify")):
        r = await console.request(method, path, headers=other_tenant.auth)
        assert r.status_code == 404, (method, r.text)
        assert r.json()["code"] == "domain_not_found"
    listed = (await console.get("/api/v1/domains", headers=other_tenant.auth)).json()["data"]
    assert domain not in {d["domain"] for d in listed}
    assert await db.fetchval("SELECT count(*) FROM domains WHERE tenant_id = $1 AND domain = $2", tenant.id, domain) == 1


async def test_pending_claim_fails_after_the_window(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                    dns: LocalDNS, runtime: Runtime, clock: ShiftableClock) -> None:
    domain = new_domain()
    await add(console, tenant, domain)
    clock.advance(days=7, minutes=1)
    await scheduled_check(runtime, dns, clock)
    assert (await status_of(console, tenant, domain))["status"] == "failed"
    # A manual check with the record present revives it.
    claim = await status_of(console, tenant, domain)
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    r = await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    assert r.json()["status"] == "verified"
    dns.remove(claim["txt"]["name"])


async def test_slug_is_locked_once_a_domain_is_verified(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                        dns: LocalDNS) -> None:
    new_slug = unique("renamed-")
    r = await console.patch("/api/v1/tenant", json={"slug": new_slug}, headers=tenant.auth)
    assert r.status_code == 200 and r.json()["slug"] == new_slug
    domain = new_domain()
    claim = await add(console, tenant, domain)
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    await console.post(f"/api/v1/domains/{domain}/verify", headers=tenant.auth)
    r = await console.patch("/api/v1/tenant", json={"slug": unique("again-")}, headers=tenant.auth)
    assert r.status_code == 409
    assert r.json()["code"] == "slug_locked"
    dns.remove(claim["txt"]["name"])
