"""SafeFetcher's HTTP logic over httpx.MockTransport: redirects, limits, headers, errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping

import httpx
import pytest
from frontdoor_core.outbound import FetchError, FetchErrorCode, OutboundPolicy, SafeFetcher

JSON = {"content-type": "application/json"}
Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that serves a table and records every request."""

    def __init__(self, routes: Mapping[str, httpx.Response | Exception]) -> None:
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.routes.get(str(request.url), httpx.Response(404, headers=JSON, content=b"{}"))
        if isinstance(answer, Exception):
            raise answer
        return answer


def _fetcher(handler: Handler, **policy: object) -> SafeFetcher:
    settings: dict[str, object] = {"total_timeout": 1.0}
    settings.update(policy)
    return SafeFetcher(OutboundPolicy(**settings), transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


def _redirect(location: str, status: int = 302, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers={"location": location, **headers})


async def _code(fetcher: SafeFetcher, url: str, **kwargs: bool) -> FetchError:
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(url, **kwargs)
    return caught.value


@pytest.mark.asyncio
async def test_plain_fetch_returns_body_headers_and_chain() -> None:
    recorder = Recorder({"https://a.example/doc": httpx.Response(200, headers=JSON, content=b'{"a": 1}')})

    result = await _fetcher(recorder).fetch("https://a.example/doc#frag")

    assert (result.status, result.body, result.final_url) == (200, b'{"a": 1}', "https://a.example/doc")
    assert result.redirect_chain == ("https://a.example/doc",)
    assert result.headers["content-type"] == "application/json"
    (sent,) = recorder.requests
    assert sent.method == "GET"
    assert sent.headers["accept"] == "application/json"
    assert sent.headers["accept-encoding"] == "identity"
    assert sent.headers["user-agent"] == "Frontdoor/0.1"
    assert "authorization" not in sent.headers
    assert "cookie" not in sent.headers


@pytest.mark.asyncio
async def test_redirects_resolve_relative_locations_and_send_no_cookies() -> None:
    recorder = Recorder(
        {
            "https://a.example/start": _redirect("/next", 301, **{"set-cookie": "sid=secret; Path=/"}),
            "https://a.example/next": _redirect("https://b.example/dir/", 307),
            "https://b.example/dir/": _redirect("doc.json", 308),
            "https://b.example/dir/doc.json": httpx.Response(200, headers=JSON, content=b"{}"),
        }
    )

    result = await _fetcher(recorder).fetch("https://a.example/start")

    assert result.redirect_chain == (
        "https://a.example/start",
        "https://a.example/next",
        "https://b.example/dir/",
        "https://b.example/dir/doc.json",
    )
    assert result.final_url == "https://b.example/dir/doc.json"
    assert all("cookie" not in r.headers for r in recorder.requests)


@pytest.mark.asyncio
async def test_redirect_limit_is_inclusive() -> None:
    hops = {f"https://a.example/{i}": _redirect(f"/{i + 1}") for i in range(4)}
    hops["https://a.example/4"] = httpx.Response(200, headers=JSON, content=b"{}")

    three = await _fetcher(Recorder(hops), max_redirects=3).fetch("https://a.example/1")
    four = await _code(_fetcher(Recorder(hops), max_redirects=3), "https://a.example/0")
    none = await _code(_fetcher(Recorder(hops), max_redirects=0), "https://a.example/3")

    assert len(three.redirect_chain) == 4
    assert four.code == FetchErrorCode.TOO_MANY_REDIRECTS
    assert none.code == FetchErrorCode.TOO_MANY_REDIRECTS


@pytest.mark.asyncio
async def test_redirect_loop_stops_at_the_limit() -> None:
    recorder = Recorder({"https://a.example/loop": _redirect("/loop")})

    error = await _code(_fetcher(recorder), "https://a.example/loop")

    assert error.code == FetchErrorCode.TOO_MANY_REDIRECTS
    assert len(recorder.requests) == 4


@pytest.mark.parametrize(
    ("location", "code"),
    [
        ("http://a.example/doc", FetchErrorCode.REDIRECT_NOT_HTTPS),
        ("https://169.254.169.254/latest/meta-data/", FetchErrorCode.BLOCKED_ADDRESS),
        ("https://[::ffff:10.0.0.1]/", FetchErrorCode.BLOCKED_ADDRESS),
        ("https://user:pw@a.example/doc", FetchErrorCode.BAD_URL),
        ("file:///etc/passwd", FetchErrorCode.BAD_URL),
        ("https://127.1/", FetchErrorCode.BLOCKED_ADDRESS),  # shorthand loopback, recognised as such
        ("https://134744072/", FetchErrorCode.BAD_URL),  # shorthand of a public address: still no
    ],
)
@pytest.mark.asyncio
async def test_every_redirect_hop_is_revalidated(location: str, code: FetchErrorCode) -> None:
    recorder = Recorder({"https://a.example/start": _redirect(location)})

    error = await _code(_fetcher(recorder), "https://a.example/start")

    assert error.code == code
    assert len(recorder.requests) == 1


@pytest.mark.asyncio
async def test_redirect_without_location_is_bad_status() -> None:
    recorder = Recorder({"https://a.example/start": httpx.Response(302)})
    error = await _code(_fetcher(recorder), "https://a.example/start")
    assert (error.code, error.status) == (FetchErrorCode.BAD_STATUS, 302)


@pytest.mark.parametrize("status", [304, 400, 401, 404, 500, 503])
@pytest.mark.asyncio
async def test_non_2xx_is_bad_status_keeping_the_status(status: int) -> None:
    recorder = Recorder({"https://a.example/doc": httpx.Response(status, headers=JSON, content=b"{}")})
    error = await _code(_fetcher(recorder), "https://a.example/doc")
    assert (error.code, error.status) == (FetchErrorCode.BAD_STATUS, status)


@pytest.mark.asyncio
async def test_content_type_rules() -> None:
    routes: dict[str, httpx.Response | Exception] = {
        "https://a.example/jwks": httpx.Response(
            200, headers={"content-type": "application/jwk-set+json"}, content=b"{}"
        ),
        "https://a.example/html": httpx.Response(200, headers={"content-type": "text/html"}, content=b"<p>"),
        "https://a.example/none": httpx.Response(200, content=b"{}"),
    }
    fetcher = _fetcher(Recorder(routes))

    assert (await fetcher.fetch("https://a.example/jwks")).body == b"{}"
    assert (await _code(fetcher, "https://a.example/html")).code == FetchErrorCode.NOT_JSON
    assert (await _code(fetcher, "https://a.example/none")).code == FetchErrorCode.NOT_JSON
    assert (await fetcher.fetch("https://a.example/html", accept_json=False)).body == b"<p>"


@pytest.mark.asyncio
async def test_accept_header_follows_accept_json() -> None:
    recorder = Recorder({"https://a.example/x": httpx.Response(200, content=b"x")})
    await _fetcher(recorder).fetch("https://a.example/x", accept_json=False)
    assert recorder.requests[0].headers["accept"] == "*/*"


@pytest.mark.asyncio
async def test_declared_length_over_the_cap_is_refused_before_reading() -> None:
    async def never_read() -> AsyncIterator[bytes]:
        raise AssertionError("body was read")
        yield b""  # pragma: no cover

    response = httpx.Response(200, headers={**JSON, "content-length": "100001"}, content=never_read())
    error = await _code(_fetcher(Recorder({"https://a.example/big": response})), "https://a.example/big")
    assert error.code == FetchErrorCode.TOO_LARGE


@pytest.mark.asyncio
async def test_streamed_body_stops_at_the_cap() -> None:
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield b"x" * 1000

    response = httpx.Response(200, headers=JSON, content=endless())
    error = await _code(
        _fetcher(Recorder({"https://a.example/big": response}), max_bytes=10_000), "https://a.example/big"
    )
    assert error.code == FetchErrorCode.TOO_LARGE
    assert pulled == 11


@pytest.mark.asyncio
async def test_content_codings_are_refused() -> None:
    response = httpx.Response(200, headers={**JSON, "content-encoding": "gzip"}, content=b"\x1f\x8b")
    error = await _code(_fetcher(Recorder({"https://a.example/gz": response})), "https://a.example/gz")
    assert error.code == FetchErrorCode.HTTP_ERROR


@pytest.mark.asyncio
async def test_oversized_header_block_is_too_large() -> None:
    response = httpx.Response(200, headers={**JSON, "x-junk": "j" * 20_000}, content=b"{}")
    error = await _code(_fetcher(Recorder({"https://a.example/h": response})), "https://a.example/h")
    assert error.code == FetchErrorCode.TOO_LARGE


@pytest.mark.asyncio
async def test_duplicate_header_fields_are_joined() -> None:
    response = httpx.Response(
        200, headers=[("Content-Type", "application/json"), ("Link", "<a>"), ("link", "<b>")], content=b"{}"
    )
    result = await _fetcher(Recorder({"https://a.example/d": response})).fetch("https://a.example/d")
    assert result.headers["link"] == "<a>, <b>"


@pytest.mark.asyncio
async def test_total_deadline_covers_a_slow_handler() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, headers=JSON, content=b"{}")  # pragma: no cover

    loop = asyncio.get_running_loop()
    started = loop.time()
    error = await _code(_fetcher(slow, total_timeout=0.2), "https://a.example/slow")  # type: ignore[arg-type]

    assert error.code == FetchErrorCode.TIMEOUT
    assert loop.time() - started < 1.0


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (httpx.ConnectError("refused"), FetchErrorCode.CONNECT_ERROR),
        (httpx.ConnectTimeout("slow"), FetchErrorCode.TIMEOUT),
        (httpx.ReadTimeout("slow"), FetchErrorCode.TIMEOUT),
        (httpx.RemoteProtocolError("garbage"), FetchErrorCode.HTTP_ERROR),
        (httpx.ReadError("reset"), FetchErrorCode.HTTP_ERROR),
    ],
)
@pytest.mark.asyncio
async def test_transport_errors_are_translated(raised: Exception, code: FetchErrorCode) -> None:
    error = await _code(_fetcher(Recorder({"https://a.example/e": raised})), "https://a.example/e")
    assert error.code == code


@pytest.mark.asyncio
async def test_url_is_checked_before_any_request() -> None:
    recorder = Recorder({})
    fetcher = _fetcher(recorder)
    assert (await _code(fetcher, "http://a.example/doc")).code == FetchErrorCode.NOT_HTTPS
    assert (await _code(fetcher, "https://10.0.0.1/doc")).code == FetchErrorCode.BLOCKED_ADDRESS
    assert (await _code(fetcher, "https://u@a.example/")).code == FetchErrorCode.BAD_URL
    assert recorder.requests == []


def test_error_codes_are_stable_strings() -> None:
    assert {c.value for c in FetchErrorCode} == {
        "not_https",
        "bad_url",
        "blocked_address",
        "mixed_answers",
        "dns_error",
        "too_many_redirects",
        "redirect_not_https",
        "too_large",
        "timeout",
        "connect_error",
        "tls_error",
        "bad_status",
        "not_json",
        "http_error",
        "target_busy",
    }
    error = FetchError(FetchErrorCode.BAD_STATUS, "status 404", status=404)
    assert error.code == "bad_status"
    assert str(error) == "bad_status: status 404"


@pytest.mark.parametrize(
    "bad", [{"max_redirects": -1}, {"max_bytes": 0}, {"total_timeout": 0}, {"connect_timeout": -1.0}]
)
def test_policy_refuses_nonsense_limits(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        OutboundPolicy(**bad)  # type: ignore[arg-type]


def test_policy_defaults() -> None:
    policy = OutboundPolicy()
    assert (policy.max_redirects, policy.max_bytes, policy.total_timeout) == (3, 100_000, 5.0)
    assert not policy.allow_http_loopback
    assert policy.allowlist == ()


@pytest.mark.asyncio
async def test_post_json_posts_once_and_never_follows_a_redirect() -> None:
    recorder = Recorder({
        "https://company.example/relay": httpx.Response(200, headers=JSON, content=b'{"status":"failed"}'),
        "https://company.example/moved": _redirect("https://elsewhere.example/relay", 307),
    })
    fetcher = _fetcher(recorder)
    result = await fetcher.post_json("https://company.example/relay", b"secret-body", content_type="application/jwt")
    assert result.status == 200 and result.body == b'{"status":"failed"}'
    sent = recorder.requests[0]
    assert sent.method == "POST" and sent.content == b"secret-body"
    assert sent.headers["content-type"] == "application/jwt"
    with pytest.raises(FetchError) as caught:
        await fetcher.post_json("https://company.example/moved", b"secret-body")
    assert caught.value.code is FetchErrorCode.BAD_STATUS
    assert [str(r.url) for r in recorder.requests] == ["https://company.example/relay", "https://company.example/moved"]
    with pytest.raises(FetchError) as refused:
        await fetcher.post_json("http://company.example/relay", b"secret-body")
    assert len(recorder.requests) == 2 and refused.value.code is not None


@pytest.mark.asyncio
async def test_get_with_headers_sends_once_and_returns_any_status() -> None:
    """`SafeFetcher.get`: the agent simulator's resource request; a refusal and its challenge come back."""
    challenge = 'DPoP error="invalid_token", algs="ES256"'
    recorder = Recorder({
        "https://api.example/items": httpx.Response(401, headers={**JSON, "www-authenticate": challenge}, content=b"{}"),
        "https://api.example/moved": _redirect("https://elsewhere.example/items", 307),
    })
    fetcher = _fetcher(recorder)
    result = await fetcher.get("https://api.example/items", headers={"Authorization": "DPoP t", "DPoP": "proof"})
    assert result.status == 401 and result.headers["www-authenticate"] == challenge
    sent = recorder.requests[0]
    assert sent.method == "GET" and sent.headers["authorization"] == "DPoP t" and sent.headers["dpop"] == "proof"
    moved = await fetcher.get("https://api.example/moved", headers={})
    assert moved.status == 307 and len(recorder.requests) == 2  # never followed
    for url, code in (("https://10.0.0.1/items", FetchErrorCode.BLOCKED_ADDRESS),
                      ("http://api.example/items", FetchErrorCode.NOT_HTTPS)):
        with pytest.raises(FetchError) as refused:
            await fetcher.get(url, headers={})
        assert refused.value.code is code
    assert len(recorder.requests) == 2
    with pytest.raises(ValueError, match="set by the fetcher"):
        await fetcher.get("https://api.example/items", headers={"Host": "other.example"})
