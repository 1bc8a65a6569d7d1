"""DPoP htu normalization (RFC 9449 §4.3 check 9, RFC 3986 §6.2.2-§6.2.3)."""

from __future__ import annotations

import pytest
from frontdoor_protocol import htu_normalize


@pytest.mark.parametrize(
    ("url", "normalized"),
    [
        ("https://shop.example/api/orders", "https://shop.example/api/orders"),
        ("HTTPS://Shop.EXAMPLE/api/orders", "https://shop.example/api/orders"),
        ("https://shop.example:443/api", "https://shop.example/api"),
        ("http://shop.example:80/api", "http://shop.example/api"),
        ("https://shop.example:8443/api", "https://shop.example:8443/api"),
        ("https://shop.example", "https://shop.example/"),
        ("https://shop.example/api?page=2#top", "https://shop.example/api"),
        ("https://shop.example/a/./b/../c", "https://shop.example/a/c"),
        ("https://shop.example/a/b/..", "https://shop.example/a/"),
        ("https://shop.example/%7euser/%2f%41", "https://shop.example/~user/%2FA"),
        ("https://[2001:DB8::1]:443/x", "https://[2001:db8::1]/x"),
        ("https://shop.example/Api//Orders", "https://shop.example/Api//Orders"),
    ],
)
def test_rfc3986_6_2_normalization(url: str, normalized: str) -> None:
    """Scheme and host lower-cased, default port dropped, dots removed, unreserved decoded; path case kept."""
    assert htu_normalize(url) == normalized


@pytest.mark.parametrize(
    "url",
    [
        "/api/orders",
        "ftp://shop.example/x",
        "https://user:pw@shop.example/x",
        "https://shop.example:99999/x",
        "https://shop.example/a b",
        "https://shop.ex\tample/x",
        "https://shop.example/caf\u00e9",
        "https://shop.example/100%",
        "https://",
    ],
)
def test_unusable_urls_are_refused(url: str) -> None:
    """Not an absolute http(s) URL of visible ASCII, user information, a bad port or a stray %."""
    with pytest.raises(ValueError) as raised:
        htu_normalize(url)
    assert url not in str(raised.value)
