"""Which address a rate limit counts, behind trusted proxies and without them."""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_core.settings import SettingsError, load_settings
from frontdoor_httpkit.client_address import client_address, network_key
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


def test_ipv6_clients_are_counted_by_their_64() -> None:
    # Rotating addresses inside one /64 (what one subscriber holds) lands in one bucket.
    keys = {client_address(request(f"2001:db8:1:2:{n:x}::{n:x}")) for n in range(1, 50)}
    assert keys == {"2001:db8:1:2::/64"}
    assert client_address(request("2001:db8:1:3::1")) == "2001:db8:1:3::/64"
    # behind a trusted proxy the forwarded hop is keyed the same way
    assert client_address(request("10.0.0.5", "2001:db8:9:9:1:2:3:4"), "10.0.0.0/8") == "2001:db8:9:9::/64"


def test_ipv4_stays_a_32_and_mapped_ipv6_is_its_ipv4() -> None:
    assert network_key("203.0.113.9") == "203.0.113.9"
    assert network_key("203.0.113.10") == "203.0.113.10"
    assert network_key("::ffff:203.0.113.9") == "203.0.113.9"
    assert network_key("[2001:db8::1]") == "2001:db8::/64"
    assert network_key("fe80::1%eth0") == "fe80::/64"
    assert network_key("testclient") == "testclient"
