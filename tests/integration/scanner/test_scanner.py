"""The public domain scanner at the wire: a good domain (Frontdoor's own generated documents,
the real issuer behind them), a broken one, hostile targets, budgets, caching, rate limits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.settings import Settings
from frontdoor_tenancy.scanner import MAX_FETCHES, MAX_LISTINGS, scanner_policy
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.scanner.conftest import scanner_client
from tests.support.clock import ShiftableClock
from tests.support.dns_server import LocalDNS
from tests.support.fixed_windows import room_in_window
from tests.support.mock_web import MockWeb

ISSUER = "https://issuer.frontdoor.test"


def _proxy(issuer: AsyncTestClient[Any]) -> Any:
    async def forward(request: httpx.Request) -> httpx.Response:
        r = await issuer.request(request.method, request.url.raw_path.decode(), headers={"accept": "application/json"})
        return httpx.Response(r.status_code, headers={k: v for k, v in r.headers.items() if k != "content-length"},
                              content=r.content)
    return forward


async def publish_good_domain(console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], t: TenantHandle,
                              dns: LocalDNS, web: MockWeb) -> str:
    """A verified domain serving exactly what Frontdoor generates, its issuer answered by the real issuer app."""
    domain = f"{unique('shop-')}.example.com"
    claim = (await console.post("/api/v1/domains", json={"domain": domain}, headers=t.auth)).json()
    dns.set_txt(claim["txt"]["name"], [claim["txt"]["value"]])
    assert (await console.post(f"/api/v1/domains/{domain}/verify", headers=t.auth)).json()["status"] == "verified"
    current = (await console.get("/api/v1/issuer", headers=t.auth)).json()
    settings = dict(current["settings"], device={"enabled": True, "scopes": ["poppy:read"]},
                    apis=[{"type": "openapi", "url": f"https://{domain}/openapi.json", "description": "Orders"},
                          {"type": "mcp", "url": f"https://{domain}/mcp", "description": "Tools"}])
    r = await console.put("/api/v1/issuer", json=settings, headers={**t.auth, "If-Match": str(current["version"])})
    assert r.status_code == 200, r.text
    cache = {"cache-control": "public, max-age=300"}
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=t.auth)).json()
    web.serve(f"https://{domain}/.well-known/poppy.json", json=doc, headers=cache)
    resource = await console.get(f"/api/v1/domains/{domain}/oauth-protected-resource", headers=t.auth)
    if resource.status_code == 200:
        web.serve(f"https://{domain}/.well-known/oauth-protected-resource", json=resource.json(), headers=cache)
    web.serve(f"https://{domain}/openapi.json", json={"openapi": "3.1.0", "info": {"title": "Orders"}, "paths": {}})
    web.serve(f"https://{domain}/mcp", status=405, body=b"", headers={"content-type": "text/plain"})
    forward = _proxy(issuer)
    for path in (f"/.well-known/oauth-authorization-server/{t.slug}", f"/{t.slug}/jwks.json",
                 f"/{t.slug}/oauth/device", f"/{t.slug}/oauth/authorize"):
        web.handle(ISSUER + path, forward)
    return domain


def codes(report: dict[str, Any]) -> list[str]:
    return [f["code"] for f in report["findings"]]


async def test_a_good_domain_scores_100_and_the_result_is_cached_and_shareable(
    scanner: AsyncTestClient[Any], console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
    dns: LocalDNS, scan_web: MockWeb, runtime: Any,
) -> None:
    domain = await publish_good_domain(console, issuer, tenant, dns, scan_web)
    r = await scanner.get("/api/v1/scan", params={"domain": domain.upper()})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["findings"] == [] and report["score"] == 100 and report["ok"] is True and report["complete"] is True
    assert r.headers["x-scan-cache"] == "miss"
    status = {c["source"]: c["status"] for c in report["checks"]}
    assert status == {"poppy.json": "pass", "issuer metadata": "pass", "jwks": "pass", "sign-in": "pass",
                      "listings": "pass", "protected-resource": status["protected-resource"]}
    assert status["protected-resource"] in ("pass", "skipped")
    # What an agent would fetch, and nothing else; no credential rode along.
    seen = [q for q in scan_web.requests if q.url.host in (domain, "issuer.frontdoor.test")]
    assert {q.url.path for q in seen} >= {"/.well-known/poppy.json", f"/.well-known/oauth-authorization-server/{tenant.slug}",
                                          f"/{tenant.slug}/jwks.json", f"/{tenant.slug}/oauth/device", "/openapi.json", "/mcp"}
    assert report["fetches"] == len(seen) <= MAX_FETCHES
    assert not any("authorization" in q.headers or "cookie" in q.headers for q in seen)
    assert {q.headers["user-agent"] for q in seen} == {scanner_policy().user_agent}
    # Cached for everyone: the page and the API answer from Redis without a fetch.
    before = len(scan_web.requests)
    again = await scanner.get("/api/v1/scan", params={"domain": domain})
    assert again.headers["x-scan-cache"] == "hit" and again.json() == report
    page = await scanner.get(f"/scan/{domain}")
    assert page.status_code == 200
    assert 'data-score="100"' in page.text and 'data-ok="true"' in page.text and 'data-finding="none"' in page.text
    assert "<script" not in page.text
    assert len(scan_web.requests) == before
    ttl = await runtime.redis.ttl(f"scan:result:v1:{{{domain}}}")
    assert 0 < ttl <= 300


async def test_a_broken_domain_gets_each_finding_with_its_fix(
    scanner: AsyncTestClient[Any], console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
    dns: LocalDNS, scan_web: MockWeb,
) -> None:
    domain = await publish_good_domain(console, issuer, tenant, dns, scan_web)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    doc["organization"]["domain"] = "www." + domain  # the wrong domain in poppy.json
    scan_web.serve(f"https://{domain}/.well-known/poppy.json", json=doc, headers={"cache-control": "no-store"})
    scan_web.serve(f"https://{domain}/mcp", status=404, body=b"", headers={"content-type": "text/plain"})
    report = (await scanner.get("/api/v1/scan", params={"domain": domain})).json()
    assert report["ok"] is False
    assert {"domain_mismatch", "cache_disabled", "unreachable"} <= set(codes(report)), report
    assert report["score"] == 100 - 20 * report["errors"] - 5 * report["warnings"]
    assert all(f["hint"] and f["doc"] for f in report["findings"])
    by_code = {f["code"]: f for f in report["findings"]}
    assert by_code["domain_mismatch"]["doc"] == "poppy-json.md#publish-check-findings"
    assert by_code["cache_disabled"]["doc"] == "scanner.md#cache-disabled"
    assert by_code["unreachable"]["source"] == "listings"
    page = (await scanner.get(f"/scan/{domain}")).text
    assert 'data-ok="false"' in page and 'data-finding="domain_mismatch"' in page
    # No FRONTDOOR_DOCS_BASE_URL (the default): the page names the doc, it links nowhere.
    assert 'data-doc="scanner.md#cache-disabled"' in page and "<code>docs/scanner.md#cache-disabled</code>" in page
    assert "frontdoor.dev/docs" not in page and 'href="scanner.md' not in page


async def test_findings_link_to_the_configured_docs_base_url(
    settings: Settings, clock: ShiftableClock, web: MockWeb, scan_web: MockWeb, migrated: str,
) -> None:
    domain = f"{unique('nodoc-')}.example.com"  # nothing served: not_found, documented in poppy-json.md
    base = "https://docs.frontdoor.test/frontdoor/docs/"
    async for client in scanner_client(settings, clock, SafeFetcher(scanner_policy(), transport=scan_web), web,
                                       scanner_rate_limit=100, docs_base_url=base):
        page = (await client.get(f"/scan/{domain}")).text
        assert 'data-finding="not_found"' in page
        assert f'<a href="{base}poppy-json.md#publish-check-findings" data-doc="poppy-json.md#publish-check-findings">' \
            in page
        assert f'<a href="{base}scanner.md" data-doc="scanner.md">How the scanner works</a>' in page


async def test_a_domain_whose_issuer_does_not_list_it(
    scanner: AsyncTestClient[Any], console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle,
    dns: LocalDNS, scan_web: MockWeb,
) -> None:
    domain = await publish_good_domain(console, issuer, tenant, dns, scan_web)
    meta = (await issuer.get(f"/.well-known/oauth-authorization-server/{tenant.slug}")).json()
    meta["poppy_domains"] = []
    scan_web.handlers.pop(("issuer.frontdoor.test", f"/.well-known/oauth-authorization-server/{tenant.slug}"))
    scan_web.serve(f"{ISSUER}/.well-known/oauth-authorization-server/{tenant.slug}", json=meta)
    scan_web.serve(f"{ISSUER}/{tenant.slug}/jwks.json", json={"keys": [{"kty": "EC", "crv": "P-256", "kid": "k",
                                                                         "x": "a", "y": "b", "d": "secret"}]})
    scan_web.handlers.pop(("issuer.frontdoor.test", f"/{tenant.slug}/jwks.json"))
    report = (await scanner.get("/api/v1/scan", params={"domain": domain})).json()
    assert {"not_listed", "cache_headers_missing", "jwks_private_key"} <= set(codes(report)), report
    assert next(c for c in report["checks"] if c["source"] == "jwks")["status"] == "fail"


@pytest.mark.parametrize("target", [
    "https://127.0.0.1/poppy.json", "https://10.0.0.7/", "https://[::1]/", "https://169.254.169.254/latest",
    "https://2130706433/", "https://0x7f.1/", "https://127.1/", "http://192.168.1.1/", "https://localhost/x",
])
async def test_a_redirect_to_a_private_address_is_never_followed(scanner: AsyncTestClient[Any], scan_web: MockWeb,
                                                                 target: str) -> None:
    domain = f"{unique('redir-')}.example.com"
    scan_web.redirect(f"https://{domain}/.well-known/poppy.json", target)
    report = (await scanner.get("/api/v1/scan", params={"domain": domain})).json()
    assert codes(report)[0] in ("blocked_address", "bad_url", "redirect_not_https"), report
    assert report["ok"] is False and report["fetches"] == 1
    assert not [q for q in scan_web.requests if q.url.host == httpx.URL(target).host]


@pytest.mark.parametrize("raw", ["127.0.0.1", "2130706433", "0x7f000001", "127.1", "0x7f.1", "localhost",
                                 "[::1]", "https://shop.example.com/", "shop.example.com:8443", "10.0.0.1", "com"])
async def test_addresses_and_urls_are_refused_as_input(scanner: AsyncTestClient[Any], scan_web: MockWeb,
                                                       raw: str) -> None:
    before = len(scan_web.requests)
    r = await scanner.get("/api/v1/scan", params={"domain": raw})
    assert r.status_code == 422 and r.json()["code"] == "invalid_domain"
    page = await scanner.get("/scan", params={"domain": raw})
    assert page.status_code == 422 and "data-error" in page.text
    assert len(scan_web.requests) == before


async def test_a_slow_trickle_is_cut_at_the_fetch_deadline(scanner: AsyncTestClient[Any], scan_web: MockWeb) -> None:
    domain = f"{unique('slow-')}.example.com"

    async def trickle() -> AsyncIterator[bytes]:
        yield b"{"
        for _ in range(200):
            await asyncio.sleep(0.1)
            yield b" "

    async def slow(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, content=trickle())

    scan_web.handle(f"https://{domain}/.well-known/poppy.json", slow)
    started = time.monotonic()
    report = (await scanner.get("/api/v1/scan", params={"domain": domain})).json()
    assert codes(report) == ["timeout"]
    assert time.monotonic() - started < scanner_policy().total_timeout + 2


@pytest.mark.parametrize("with_length", [True, False])
async def test_a_huge_response_is_refused(scanner: AsyncTestClient[Any], scan_web: MockWeb, with_length: bool) -> None:
    domain = f"{unique('huge-')}.example.com"
    sent = {"bytes": 0}

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(5_000):
            sent["bytes"] += 1_000
            yield b" " * 1_000

    async def huge(_: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if with_length:
            return httpx.Response(200, headers={**headers, "content-length": "5000000"}, content=b" " * 5_000_000)
        return httpx.Response(200, headers=headers, content=endless())

    scan_web.handle(f"https://{domain}/.well-known/poppy.json", huge)
    report = (await scanner.get("/api/v1/scan", params={"domain": domain})).json()
    assert codes(report) == ["too_large"]
    if not with_length:
        assert sent["bytes"] <= scanner_policy().max_bytes + 70_000  # stopped reading soon after the cap


async def test_a_scan_stops_at_its_fetch_budget(scanner: AsyncTestClient[Any], console: AsyncTestClient[Any],
                                                issuer: AsyncTestClient[Any], tenant: TenantHandle, dns: LocalDNS,
                                                scan_web: MockWeb) -> None:
    domain = await publish_good_domain(console, issuer, tenant, dns, scan_web)
    doc = (await console.get(f"/api/v1/domains/{domain}/poppy.json", headers=tenant.auth)).json()
    doc["apis"] = [{"type": "mcp", "url": f"https://{domain}/mcp{i}", "description": "Tools"} for i in range(9)]
    for i in range(9):
        scan_web.serve(f"https://{domain}/mcp{i}", status=401, body=b"", headers={"content-type": "text/plain"})
    scan_web.serve(f"https://{domain}/.well-known/poppy.json", json=doc, headers={"cache-control": "max-age=300"})
    report = (await scanner.get("/api/v1/scan", params={"domain": domain})).json()
    assert report["fetches"] <= MAX_FETCHES
    assert report["complete"] is False and "not_checked" in codes(report)
    probed = {q.url.path for q in scan_web.requests if q.url.host == domain and q.url.path.startswith("/mcp")}
    assert len(probed) <= MAX_LISTINGS


async def test_one_host_gets_a_bounded_share_of_requests(settings: Settings, clock: ShiftableClock, web: MockWeb,
                                                         migrated: str) -> None:
    """A poppy.json pointing every listing at a third party cannot make the scanner flood it."""
    target_web = MockWeb()
    victim = f"{unique('victim-')}.example.net"
    async for client in scanner_client(settings, clock, SafeFetcher(scanner_policy(), transport=target_web), web,
                                       scanner_rate_limit=100, scanner_target_rate_limit=3):
        await room_in_window(60, needed_s=15)  # the 3 scans fall in one minute of the per-host limit
        for n in range(3):
            domain = f"{unique('flood-')}.example.com"
            doc = {"protocol_version": "0.2", "organization": {"name": "X", "domain": domain},
                   "apis": [{"type": "mcp", "url": f"https://{victim}/m{n}{i}", "description": "d"} for i in range(4)]}
            target_web.serve(f"https://{domain}/.well-known/poppy.json", json=doc)
            report = (await client.get("/api/v1/scan", params={"domain": domain})).json()
            if n == 2:
                assert "target_busy" in codes(report)
        assert len([q for q in target_web.requests if q.url.host == victim]) == 3


async def test_fresh_scans_are_rate_limited_per_client_network_but_cached_results_are_not(
    settings: Settings, clock: ShiftableClock, web: MockWeb, migrated: str, runtime: Any,
) -> None:
    fake = MockWeb()
    domains = [f"{unique('rl-')}.example.com" for _ in range(3)]
    # Every test client is the same network ("testclient"): start its bucket afresh.
    async for key in runtime.redis.scan_iter(match="rl:scan:{testclient}:*"):
        await runtime.redis.delete(key)
    async for client in scanner_client(settings, clock, SafeFetcher(scanner_policy(), transport=fake), web,
                                       scanner_rate_limit=2):
        await room_in_window(3600, needed_s=20)  # the 3 fresh scans and the page fall in one hour of the limit
        for d in domains[:2]:
            assert (await client.get("/api/v1/scan", params={"domain": d})).status_code == 200
        third = await client.get("/api/v1/scan", params={"domain": domains[2]})
        assert third.status_code == 429 and third.json()["code"] == "rate_limited"
        assert int(third.headers["retry-after"]) > 0
        page = await client.get(f"/scan/{domains[2]}")
        assert page.status_code == 429 and "data-error" in page.text
        cached = await client.get("/api/v1/scan", params={"domain": domains[0]})
        assert cached.status_code == 200 and cached.headers["x-scan-cache"] == "hit"
        assert not [q for q in fake.requests if q.url.host == domains[2]]


async def test_the_form_works_without_javascript(scanner: AsyncTestClient[Any]) -> None:
    form = await scanner.get("/scan")
    assert form.status_code == 200 and 'method="get" action="/scan"' in form.text and "<script" not in form.text
    r = await scanner.get("/scan", params={"domain": " Shop.Example.COM "}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/scan/shop.example.com"
