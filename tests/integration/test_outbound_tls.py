"""SafeFetcher against a real local TLS server (protocol §4.1 fetch rules).

The resolver is injected so ``agent.test`` points at 127.0.0.1; the server's certificate
is issued for ``agent.test`` by a trustme CA the fetcher is told to trust. Each test
asserts what reached the server as well as the error code.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from frontdoor_core.outbound import FetchError, FetchErrorCode, OutboundPolicy, SafeFetcher

# tests/ is not a package and the root pytest config is not ours to change, so the
# support directory is put on the path explicitly.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from tls_server import Route, RouteServer, json_route, redirect_route

DOC = b'{"client_id": "https://agent.test/agent.json"}'


class MapResolver:
    """Answers from a table; records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table[host])


class RebindingResolver:
    """Answers a public address the first time, loopback ever after."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return ["93.184.215.14"] if self.calls == 1 else ["127.0.0.1"]


def _policy(**overrides: object) -> OutboundPolicy:
    settings: dict[str, object] = {
        "allowlist": ("127.0.0.1/32",),
        "total_timeout": 1.0,
        "connect_timeout": 0.5,
    }
    settings.update(overrides)
    return OutboundPolicy(**settings)  # type: ignore[arg-type]


@pytest.fixture
def server() -> Iterator[RouteServer]:
    with RouteServer(("agent.test",)) as srv:
        srv.route("/agent.json", json_route(DOC))
        yield srv


def _fetcher(srv: RouteServer, policy: OutboundPolicy | None = None, resolver: object = None) -> SafeFetcher:
    return SafeFetcher(
        policy if policy is not None else _policy(),
        resolver=resolver or MapResolver({"agent.test": ["127.0.0.1"]}),  # type: ignore[arg-type]
        ssl_context=srv.client_context(),
    )


async def _error(fetcher: SafeFetcher, url: str, **kwargs: bool) -> FetchError:
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(url, **kwargs)
    return caught.value


@pytest.mark.asyncio
async def test_fetches_json_over_tls_verified_for_the_original_hostname(server: RouteServer) -> None:
    resolver = MapResolver({"agent.test": ["127.0.0.1"]})
    result = await _fetcher(server, resolver=resolver).fetch(server.url("/agent.json"))

    assert result.status == 200
    assert result.body == DOC
    assert result.final_url == server.url("/agent.json")
    assert result.redirect_chain == (server.url("/agent.json"),)
    assert result.headers["content-type"] == "application/json"
    assert 0 < result.elapsed < 1.0
    # The socket went to the resolved IP, but TLS was for the URL's name: SNI and the
    # certificate check (the cert names only agent.test, not 127.0.0.1) both used it.
    assert server.sni_names == ["agent.test"]
    assert resolver.calls == [("agent.test", server.port)]
    (seen,) = server.requests
    assert seen.header("host") == [f"agent.test:{server.port}"]
    assert seen.header("accept") == ["application/json"]
    assert seen.header("accept-encoding") == ["identity"]
    assert seen.header("user-agent") == ["Frontdoor/0.1"]
    assert seen.header("authorization") == []
    assert seen.header("cookie") == []


@pytest.mark.asyncio
async def test_loopback_without_allowlist_is_blocked_before_connecting(server: RouteServer) -> None:
    error = await _error(_fetcher(server, _policy(allowlist=())), server.url("/agent.json"))

    assert error.code == FetchErrorCode.BLOCKED_ADDRESS
    assert server.requests == []
    assert server.sni_names == []


@pytest.mark.asyncio
async def test_rebinding_answer_is_checked_on_the_address_actually_connected_to(server: RouteServer) -> None:
    resolver = RebindingResolver()
    # What a check-then-connect validator would have seen: a public address.
    assert await resolver.resolve("agent.test", server.port) == ["93.184.215.14"]

    error = await _error(_fetcher(server, _policy(allowlist=()), resolver), server.url("/agent.json"))

    assert error.code == FetchErrorCode.BLOCKED_ADDRESS
    assert resolver.calls == 2  # exactly one lookup by the fetcher, at connect time
    assert server.requests == []


@pytest.mark.asyncio
async def test_mixed_public_and_loopback_answers_are_refused(server: RouteServer) -> None:
    resolver = MapResolver({"agent.test": ["8.8.8.8", "127.0.0.1"]})

    error = await _error(_fetcher(server, _policy(allowlist=()), resolver), server.url("/agent.json"))

    assert error.code == FetchErrorCode.MIXED_ANSWERS
    assert server.requests == []


@pytest.mark.asyncio
async def test_unresolvable_host_is_dns_error(server: RouteServer) -> None:
    error = await _error(_fetcher(server, resolver=MapResolver({})), server.url("/agent.json"))

    assert error.code == FetchErrorCode.DNS_ERROR


@pytest.mark.asyncio
async def test_refused_connection_is_connect_error(server: RouteServer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    error = await _error(_fetcher(server), f"https://agent.test:{closed_port}/agent.json")

    assert error.code == FetchErrorCode.CONNECT_ERROR


@pytest.mark.asyncio
async def test_certificate_for_another_hostname_is_tls_error() -> None:
    with RouteServer(("other.test",)) as other:
        other.route("/agent.json", json_route(DOC))
        resolver = MapResolver({"agent.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
        fetcher = _fetcher(other, resolver=resolver)

        error = await _error(fetcher, other.url("/agent.json", host="agent.test"))
        # Control: same server, same CA, the name on the certificate: accepted.
        result = await fetcher.fetch(other.url("/agent.json", host="other.test"))

    assert error.code == FetchErrorCode.TLS_ERROR
    assert result.body == DOC
    assert other.sni_names == ["agent.test", "other.test"]
    assert [r.path for r in other.requests] == ["/agent.json"]


@pytest.mark.asyncio
async def test_slow_trickle_is_abandoned_at_the_total_deadline(server: RouteServer) -> None:
    server.route("/slow", Route(body=b"x" * 200, trickle_delay=0.05))  # 10 s in all
    fetcher = _fetcher(server, _policy(total_timeout=1.0))

    started = time.monotonic()
    error = await _error(fetcher, server.url("/slow"))
    elapsed = time.monotonic() - started

    assert error.code == FetchErrorCode.TIMEOUT
    assert 0.9 <= elapsed < 2.0


@pytest.mark.asyncio
async def test_declared_content_length_over_the_cap_is_too_large(server: RouteServer) -> None:
    server.route("/big", Route(body=b"x" * 1024, repeat=200))

    error = await _error(_fetcher(server), server.url("/big"))

    assert error.code == FetchErrorCode.TOO_LARGE


@pytest.mark.asyncio
async def test_endless_chunked_body_stops_reading_at_the_cap(server: RouteServer) -> None:
    server.route("/endless", Route(body=b"x" * 16384, repeat=100_000, chunked=True))  # 1.6 GB
    fetcher = _fetcher(server, _policy(max_bytes=50_000))

    started = time.monotonic()
    error = await _error(fetcher, server.url("/endless"))

    assert error.code == FetchErrorCode.TOO_LARGE
    assert time.monotonic() - started < 1.0


@pytest.mark.asyncio
async def test_body_exactly_at_the_cap_is_accepted(server: RouteServer) -> None:
    server.route("/edge", Route(body=b"x" * 1000, repeat=50, chunked=True))

    result = await _fetcher(server, _policy(max_bytes=50_000)).fetch(server.url("/edge"))

    assert len(result.body) == 50_000


@pytest.mark.asyncio
async def test_redirect_to_plain_http_is_refused(server: RouteServer) -> None:
    server.route("/to-http", redirect_route(f"http://agent.test:{server.port}/agent.json"))

    error = await _error(_fetcher(server), server.url("/to-http"))

    assert error.code == FetchErrorCode.REDIRECT_NOT_HTTPS
    assert [r.path for r in server.requests] == ["/to-http"]


@pytest.mark.asyncio
async def test_three_redirects_are_followed_and_recorded(server: RouteServer) -> None:
    server.route("/r1", redirect_route("/r2", 301))
    server.route("/r2", redirect_route(server.url("/r3"), 307))
    server.route("/r3", redirect_route("agent.json", 308))

    result = await _fetcher(server).fetch(server.url("/r1"))

    assert result.body == DOC
    assert result.redirect_chain == tuple(server.url(p) for p in ("/r1", "/r2", "/r3", "/agent.json"))
    assert result.final_url == server.url("/agent.json")


@pytest.mark.asyncio
async def test_fourth_redirect_is_too_many(server: RouteServer) -> None:
    for i in range(1, 5):
        server.route(f"/hop{i}", redirect_route(f"/hop{i + 1}"))
    server.route("/hop5", json_route(DOC))

    error = await _error(_fetcher(server), server.url("/hop1"))

    assert error.code == FetchErrorCode.TOO_MANY_REDIRECTS
    assert [r.path for r in server.requests] == ["/hop1", "/hop2", "/hop3", "/hop4"]


@pytest.mark.asyncio
async def test_wrong_content_type_is_not_json(server: RouteServer) -> None:
    server.route("/html", Route(headers=(("Content-Type", "text/html"),), body=b"<html>"))

    error = await _error(_fetcher(server), server.url("/html"))
    result = await _fetcher(server).fetch(server.url("/html"), accept_json=False)

    assert error.code == FetchErrorCode.NOT_JSON
    assert result.body == b"<html>"


@pytest.mark.asyncio
async def test_duplicate_headers(server: RouteServer) -> None:
    two_types = (("Content-Type", "application/json"), ("Content-Type", "text/html"))
    server.route("/two-types", Route(headers=two_types, body=DOC))
    server.route("/two-caches", json_route(DOC, extra=(("Cache-Control", "max-age=60"), ("Cache-Control", "public"))))

    error = await _error(_fetcher(server), server.url("/two-types"))
    result = await _fetcher(server).fetch(server.url("/two-caches"))

    assert error.code == FetchErrorCode.NOT_JSON  # ambiguous media type
    assert result.headers["cache-control"] == "max-age=60, public"


@pytest.mark.asyncio
async def test_error_status_is_bad_status_with_the_status(server: RouteServer) -> None:
    error = await _error(_fetcher(server), server.url("/missing"))

    assert error.code == FetchErrorCode.BAD_STATUS
    assert error.status == 404


@pytest.mark.asyncio
async def test_plain_http_to_loopback_only_in_development_mode() -> None:
    with RouteServer(("localhost",), tls=False) as plain:
        plain.route("/agent.json", json_route(DOC))
        resolver = MapResolver({"localhost": ["127.0.0.1"], "agent.test": ["127.0.0.1"]})
        dev = SafeFetcher(_policy(allowlist=(), allow_http_loopback=True), resolver=resolver)
        prod = SafeFetcher(_policy(allowlist=()), resolver=resolver)

        result = await dev.fetch(plain.url("/agent.json"))
        refused = await _error(prod, plain.url("/agent.json"))
        not_loopback = await _error(dev, plain.url("/agent.json", host="agent.test"))

    assert result.body == DOC
    # In production ``localhost`` is a loopback address whatever the scheme: refused as such before the scheme.
    assert refused.code == FetchErrorCode.BLOCKED_ADDRESS
    assert not_loopback.code == FetchErrorCode.NOT_HTTPS
    assert len(plain.requests) == 1
