"""SafeSender over SafeFetcher.post: any status comes back, failures become error classes, rules still hold."""

from __future__ import annotations

import httpx
import pytest
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_webhooks import RESPONSE_LIMIT, ErrorClass, SafeSender, SendError

HEADERS = {"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,x", "content-type": "application/json"}


def _sender(handler: httpx.MockTransport, **policy: object) -> SafeSender:
    return SafeSender(SafeFetcher(OutboundPolicy(**policy), transport=handler))  # type: ignore[arg-type]


async def test_posts_the_exact_bytes_and_headers_and_returns_any_status() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, headers={"Retry-After": "7", "webhook-delivery": "abort"}, content=b"busy")

    response = await _sender(httpx.MockTransport(handler)).post("https://hooks.example.com/in", b'{"a":1}', HEADERS, 5)
    assert response.status == 503
    assert response.headers["retry-after"] == "7" and response.headers["webhook-delivery"] == "abort"
    assert response.body == b"busy"
    [request] = seen
    assert request.method == "POST" and request.content == b'{"a":1}'
    assert request.headers["webhook-signature"] == "v1,x" and request.headers["content-type"] == "application/json"
    assert "cookie" not in request.headers


async def test_redirects_are_not_followed() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(307, headers={"Location": "https://elsewhere.example.com/"})

    response = await _sender(httpx.MockTransport(handler)).post("https://hooks.example.com/in", b"{}", HEADERS, 5)
    assert response.status == 307 and calls == ["/in"]


async def test_long_bodies_are_cut_not_refused() -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200, content=b"x" * (RESPONSE_LIMIT + 10)))
    response = await _sender(transport).post("https://hooks.example.com/in", b"{}", HEADERS, 5)
    assert response.status == 200 and len(response.body) == RESPONSE_LIMIT


@pytest.mark.parametrize(("url", "error"), [
    ("http://hooks.example.com/in", ErrorClass.INVALID_URL),
    ("https://10.0.0.1/in", ErrorClass.BLOCKED_ADDRESS),
    ("https://127.0.0.1/in", ErrorClass.BLOCKED_ADDRESS),
])
async def test_url_and_address_rules_still_apply(url: str, error: ErrorClass) -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(200))
    with pytest.raises(SendError) as info:
        await _sender(transport).post(url, b"{}", HEADERS, 5)
    assert info.value.error_class is error


async def test_transport_failures_are_classified() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    for handler, error in ((timeout, ErrorClass.TIMEOUT), (refused, ErrorClass.CONNECT)):
        with pytest.raises(SendError) as info:
            await _sender(httpx.MockTransport(handler)).post("https://hooks.example.com/in", b"{}", HEADERS, 5)
        assert info.value.error_class is error


async def test_reserved_headers_are_refused() -> None:
    fetcher = SafeFetcher(transport=httpx.MockTransport(lambda _: httpx.Response(200)))
    with pytest.raises(ValueError, match="Host"):
        await fetcher.post("https://hooks.example.com/in", b"{}", headers={"Host": "evil.example"})


async def test_a_content_coded_body_is_dropped_not_decompressed() -> None:
    import gzip

    bomb = gzip.compress(b"0" * 5_000_000)
    transport = httpx.MockTransport(
        lambda _: httpx.Response(200, headers={"Content-Encoding": "gzip"}, content=bomb))
    fetcher = SafeFetcher(transport=transport)
    result = await fetcher.post("https://hooks.example.com/in", b"{}", headers=HEADERS)
    assert result.status == 200 and result.body == b"" and result.truncated
