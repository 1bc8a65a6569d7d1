"""The scanner's outbound policy over real loopback sockets: it never reaches a private
address, whatever ``FRONTDOOR_OUTBOUND_ALLOWLIST`` lets Frontdoor's other fetches reach."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from frontdoor_core.outbound import FetchError, FetchErrorCode, SafeFetcher
from frontdoor_core.settings import Settings
from frontdoor_tenancy.scanner import ScanBudget, run_scan, scanner_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "support"))
from tls_server import Route, RouteServer, json_route, redirect_route

from tests.support.clock import ShiftableClock


class MapResolver:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return list(self.table[host])


def _console_fetchers(settings: Settings, srv: RouteServer, resolver: MapResolver) -> tuple[Any, Any]:
    """The console's two default fetchers for the same settings, made to trust the test CA and resolver."""
    from frontdoor_console import app as console_app

    tuned = msgspec.structs.replace(settings, env="production", outbound_allowlist="127.0.0.1/32,shop.test")
    outbound = console_app._default_fetcher(tuned)
    scanner = console_app._default_scanner_fetcher(tuned)
    assert outbound.policy.allowlist and scanner.policy.allowlist == ()
    assert scanner.policy.allow_http_loopback is False
    rebuild = [SafeFetcher(f.policy, resolver=resolver, ssl_context=srv.client_context()) for f in (outbound, scanner)]
    return rebuild[0], rebuild[1]


@pytest.fixture
def server() -> Any:
    with RouteServer(("shop.test",)) as srv:
        srv.route("/doc.json", json_route(b'{"ok": true}'))
        yield srv


async def test_the_outbound_allowlist_is_not_inherited(settings: Settings, server: RouteServer) -> None:
    resolver = MapResolver({"shop.test": ["127.0.0.1"]})
    outbound, scanner = _console_fetchers(settings, server, resolver)
    assert (await outbound.fetch(server.url("/doc.json"))).status == 200  # Frontdoor's own fetches may
    served = len(server.requests)
    for url in (server.url("/doc.json"), server.url("/doc.json").replace("shop.test", "127.0.0.1")):
        with pytest.raises(FetchError) as caught:
            await scanner.fetch(url)
        assert caught.value.code == FetchErrorCode.BLOCKED_ADDRESS
    assert len(server.requests) == served  # the scanner sent nothing


async def test_a_name_resolving_to_loopback_and_a_redirect_to_it_are_blocked(server: RouteServer) -> None:
    resolver = MapResolver({"shop.test": ["127.0.0.1"], "inside.test": ["10.1.2.3"], "mixed.test": ["8.8.8.8", "127.0.0.1"]})
    # Allowlisted for the test only, as FRONTDOOR_SCANNER_ALLOWLIST would be: the first hop connects.
    policy = msgspec.structs.replace(scanner_policy(("shop.test",)), total_timeout=2.0)
    fetcher = SafeFetcher(policy, resolver=resolver, ssl_context=server.client_context())
    server.route("/to-loopback", redirect_route(f"https://127.0.0.1:{server.port}/doc.json"))
    server.route("/to-inside", redirect_route(f"https://inside.test:{server.port}/doc.json"))
    server.route("/to-mixed", redirect_route(f"https://mixed.test:{server.port}/doc.json"))
    server.route("/to-http", redirect_route(f"http://shop.test:{server.port}/doc.json"))
    expected = {"/to-loopback": FetchErrorCode.BLOCKED_ADDRESS, "/to-inside": FetchErrorCode.BLOCKED_ADDRESS,
                "/to-mixed": FetchErrorCode.MIXED_ANSWERS, "/to-http": FetchErrorCode.REDIRECT_NOT_HTTPS}
    for path, code in expected.items():
        with pytest.raises(FetchError) as caught:
            await fetcher.fetch(server.url(path))
        assert caught.value.code == code, path
    assert [r.path for r in server.requests] == list(expected)  # only the first hops reached the server


async def test_trickle_and_huge_bodies_over_a_socket(server: RouteServer) -> None:
    resolver = MapResolver({"shop.test": ["127.0.0.1"]})
    fetcher = SafeFetcher(scanner_policy(("shop.test",)), resolver=resolver, ssl_context=server.client_context())
    server.route("/huge", Route(body=b" " * 10_000, repeat=50, chunked=True))
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(server.url("/huge"))
    assert caught.value.code == FetchErrorCode.TOO_LARGE
    server.route("/slow", Route(body=b"{" + b" " * 200 + b"}", trickle_delay=0.05))
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(server.url("/slow"))
    assert caught.value.code == FetchErrorCode.TIMEOUT


async def test_a_scan_of_a_domain_resolving_to_a_private_address_sends_nothing(clock: ShiftableClock) -> None:
    resolver = MapResolver({"evil.example.com": ["127.0.0.1"]})
    budget = ScanBudget(SafeFetcher(scanner_policy(), resolver=resolver))
    report = await run_scan(budget, "evil.example.com", now=clock())
    assert [f.code for f in report.findings] == ["blocked_address"]
    assert resolver.calls == ["evil.example.com"] and report.ok is False


async def test_the_scan_deadline_leaves_the_rest_not_checked(clock: ShiftableClock) -> None:
    now = [0.0]

    class Web:
        async def fetch(self, url: str, *, accept_json: bool = True) -> Any:
            from frontdoor_core.outbound import FetchResult

            now[0] += 25.0  # the first fetch takes longer than the whole scan may

            body = (b'{"protocol_version": "0.2", "organization": {"name": "X", "domain": "a.example.com"},'
                    b' "auth": {"issuer": "https://id.example.com"}, "web": {"url": "https://a.example.com"}}')
            return FetchResult(final_url=url, status=200, headers={"cache-control": "max-age=300"}, body=body,
                               redirect_chain=(url,), elapsed=0.0)

    budget = ScanBudget(Web(), deadline_s=20.0, clock=lambda: now[0])
    report = await run_scan(budget, "a.example.com", now=clock())
    assert report.fetches == 1 and report.complete is False
    assert [f.code for f in report.findings if f.severity == "info"] == ["not_checked"]
    assert {c.source: c.status for c in report.checks}["jwks"] == "skipped"


@pytest.mark.parametrize("docs_base", ["", "https://docs.example.org/frontdoor/docs/"])
async def test_the_requests_name_a_page_this_deployment_serves(settings: Settings, server: RouteServer,
                                                               scanner: Any, docs_base: str) -> None:
    """The User-Agent of the scanner's and of Frontdoor's own fetches names this deployment
    (its published docs, or its console), never a made-up site."""
    from frontdoor_console import app as console_app

    resolver = MapResolver({"shop.test": ["127.0.0.1"]})
    tuned = msgspec.structs.replace(settings, env="production", console_base_url="https://console.frontdoor.test",
                                    docs_base_url=docs_base, scanner_allowlist="shop.test",
                                    outbound_allowlist="shop.test")
    built = (console_app._default_scanner_fetcher(tuned), console_app._default_fetcher(tuned))
    for f in built:
        fetched = await SafeFetcher(f.policy, resolver=resolver, ssl_context=server.client_context()).fetch(
            server.url("/doc.json"))
        assert fetched.status == 200
    scan_ua, own_ua = (r.header("user-agent") for r in server.requests)
    about = f"{docs_base}scanner.md" if docs_base else "https://console.frontdoor.test/scan"
    assert scan_ua == [f"Frontdoor-Scanner/0.1 (+{about})"]
    assert own_ua == ["Frontdoor/0.1 (+https://console.frontdoor.test)"]
    assert "frontdoor.dev" not in scan_ua[0] + own_ua[0]
    if not docs_base:  # the console serves the page it names
        page = await scanner.get("/scan")
        assert page.status_code == 200 and "<form" in page.text
