"""Which address a rate limit counts, behind trusted proxies and without them."""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_core.settings import SettingsError, load_settings
from frontdoor_httpkit.client_address import client_address
from litestar import Request


def request(peer: str, *forwarded: str) -> Request[Any, Any, Any]:
    headers = [(b"x-forwarded-for", f.encode()) for f in forwarded]
    scope = {"type": "http", "method": "GET", "path": "/", "headers": headers, "client": (peer, 1234),
             "query_string": b"", "app": None}
    return Request(scope)  # type: ignore[arg-type]


def test_without_trusted_proxies_the_header_is_ignored() -> None:
    assert client_address(request("203.0.113.9", "198.51.100.1")) == "203.0.113.9"


def test_behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client() -> None:
    trusted = "10.0.0.0/8"
    # the client forged "1.2.3.4" at the left; the proxy appended the real peer
    assert client_address(request("10.0.0.5", "1.2.3.4, 198.51.100.7"), trusted) == "198.51.100.7"
    assert client_address(request("10.0.0.5", "198.51.100.7, 10.0.0.9"), trusted) == "198.51.100.7"
    assert client_address(request("10.0.0.5", "1.2.3.4", "198.51.100.8"), trusted) == "198.51.100.8"


def test_an_untrusted_peer_cannot_choose_its_bucket() -> None:
    assert client_address(request("198.51.100.7", "10.9.9.9"), "10.0.0.0/8") == "198.51.100.7"


def test_a_proxy_with_no_header_is_itself() -> None:
    assert client_address(request("10.0.0.5"), "10.0.0.0/8") == "10.0.0.5"


def test_the_setting_is_validated() -> None:
    assert load_settings({"FRONTDOOR_TRUSTED_PROXIES": "10.0.0.0/8, ::1"}).trusted_proxies
    with pytest.raises(SettingsError, match="FRONTDOOR_TRUSTED_PROXIES"):
        load_settings({"FRONTDOOR_TRUSTED_PROXIES": "not-a-network"})
