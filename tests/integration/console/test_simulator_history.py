"""The agent simulator's run history (issue #19 §1): every run is stored per tenant, listed on
``/simulator`` (latest 20) with a page per run; viewers read it, admins and owners run; no
token, assertion, proof or key is stored or shown; another tenant's run is a 404."""

from __future__ import annotations

import re
from typing import Any

import httpx
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in
from tests.integration.console.test_simulator import codes, run, steps, wire
from tests.integration.issuer.test_pap10_publish_check import publish_all
from tests.integration.test_issuer_discovery import verified_domain
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb


def _runs(page: str) -> list[str]:
    return re.findall(r'<tr data-run="(sim_\w+)"', page)


def _sent_secrets(web: MockWeb) -> list[str]:
    """Every token, assertion and proof the simulator sent, and their signatures."""
    sent = [q for q in web.requests if q.method == "POST"]
    found = [q.headers["dpop"] for q in sent if "dpop" in q.headers]
    found += [q.headers["authorization"].split(" ", 1)[1] for q in sent if "authorization" in q.headers]
    for q in sent:
        if q.url.path.endswith("/oauth/token") or q.url.path.endswith("/oauth/revoke"):
            form = httpx.QueryParams(q.content.decode())
            found += [form[k] for k in ("client_assertion", "assertion", "token") if k in form]
    return found + [s.rsplit(".", 1)[-1] for s in found if s.count(".") == 2]


async def test_a_run_is_recorded_listed_and_shown_without_secrets(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS, web: MockWeb,
    db: Any,
) -> None:
    domain = await verified_domain(console, tenant, dns)
    await publish_all(console, issuer, tenant, web, domain)
    await wire(web, console, issuer, tenant)
    live = await run(console, tenant)
    assert live.status_code == 200 and steps(live.text)["session"] == "yes", live.text
    run_id = re.search(r'href="/simulator-runs/(sim_\w+)" data-run-link', live.text)
    assert run_id is not None
    rid = run_id.group(1)

    row = await db.fetchrow("SELECT * FROM simulator_runs WHERE tenant_id = $1", tenant.id)
    admin = await db.fetchrow("SELECT id, email FROM admins WHERE tenant_id = $1 AND email = $2", tenant.id,
                              tenant.email)
    assert row["id"] == rid and row["member_id"] == admin["id"] and row["member_email"] == tenant.email
    assert row["started_at"] <= row["finished_at"] and row["ok"] is True
    stored = row["steps"]
    assert [(s["key"], s["status"]) for s in stored] == [
        ("discovery", "passed"), ("session", "passed"), ("api", "not_run"), ("signin", "informational"),
        ("operation", "not_run"), ("revoke", "not_run"), ("refused", "not_run")]
    assert all(s["duration_ms"] > 0 for s in stored if s["status"] != "not_run")
    assert all(set(x) == {"method", "url", "status", "elapsed_ms", "error"} for s in stored for x in s["exchanges"])
    assert any(x["url"].endswith(f"/{tenant.slug}/oauth/token") and x["status"] == 200
               for x in stored[1]["exchanges"])

    secrets = _sent_secrets(web)
    assert len(secrets) >= 4
    whole_row = str(dict(row))
    page = await console.get(f"/simulator-runs/{rid}")
    assert page.status_code == 200
    for s in secrets:
        assert s not in whole_row and s not in page.text
    assert '"d"' not in whole_row and "[redacted]" not in whole_row  # nothing redacted: never stored at all
    assert steps(page.text) == {"discovery": "yes", "session": "yes", "api": "skipped", "signin": "skipped",
                                "operation": "skipped", "revoke": "skipped", "refused": "skipped"}
    assert f"{tenant.slug}/oauth/token" in page.text and tenant.email in page.text

    listing = await console.get("/simulator")
    assert _runs(listing.text) == [rid]
    # A failed run is recorded with its finding code, listed first.
    web.serve(f"https://{domain}/.well-known/poppy.json", status=404)
    failed = await console.post("/simulator", data={"_csrf_token": re.findall(
        r'name="_csrf_token" value="([^"]+)"', listing.text)[0]})
    assert codes(failed.text) == ["not_found"]
    listing = await console.get("/simulator")
    newest = _runs(listing.text)
    assert len(newest) == 2 and newest[1] == rid
    first_row = listing.text[listing.text.index(f'data-run="{newest[0]}"'):]
    first_row = first_row[:first_row.index("</tr>")]
    assert "failed" in first_row and "<code class=\"small\">not_found</code>" in first_row
    stored_failed = await db.fetchval("SELECT ok FROM simulator_runs WHERE tenant_id = $1 AND id = $2", tenant.id,
                                      newest[0])
    assert stored_failed is False


async def test_viewers_read_history_and_other_tenants_get_404(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, other_tenant: TenantHandle,
    dns: LocalDNS, web: MockWeb, db: Any,
) -> None:
    await verified_domain(console, tenant, dns)
    await wire(web, console, issuer, tenant)
    r = await run(console, tenant)
    rid = re.search(r'href="/simulator-runs/(sim_\w+)" data-run-link', r.text)
    assert rid is not None
    run_id = rid.group(1)

    viewer = await add_admin(db, tenant, "viewer")
    csrf = await sign_in(console, viewer)
    listing = await console.get("/simulator")
    assert listing.status_code == 200 and _runs(listing.text) == [run_id] and "Run the simulator" not in listing.text
    assert (await console.get(f"/simulator-runs/{run_id}")).status_code == 200
    assert (await console.post("/simulator", data={"_csrf_token": csrf})).status_code == 403
    assert await db.fetchval("SELECT count(*) FROM simulator_runs WHERE tenant_id = $1", tenant.id) == 1

    await sign_in(console, other_tenant.email)
    theirs = await console.get(f"/simulator-runs/{run_id}")
    assert theirs.status_code == 404 and run_id not in theirs.text
    assert _runs((await console.get("/simulator")).text) == []
    assert (await console.get("/simulator-runs/sim_doesnotexist")).status_code == 404
