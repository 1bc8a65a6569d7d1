"""The address classifier: which IPs are public (protocol §4.1, SSRF)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest
from frontdoor_core.outbound import embedded_ipv4, is_public_address, parse_ip

NON_PUBLIC = [
    "127.0.0.1",  # loopback
    "127.255.255.254",
    "10.0.0.1",  # private
    "10.255.255.255",
    "172.16.0.1",
    "172.31.255.254",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata, link-local
    "100.64.0.1",  # CGNAT
    "100.127.255.254",
    "0.0.0.0",  # unspecified
    "0.1.2.3",  # "this network"
    "192.0.0.9",  # IETF protocol assignments
    "192.0.2.1",  # documentation
    "198.51.100.7",
    "203.0.113.9",
    "198.18.0.1",  # benchmarking
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "224.0.0.1",  # multicast (is_global says True for some of these)
    "224.0.1.1",
    "239.255.255.250",
    "240.0.0.1",  # reserved
    "255.255.255.255",  # broadcast
    "::",  # unspecified
    "::1",  # loopback
    "fe80::1",  # link-local
    "fe80::1%eth0",
    "fec0::1",  # deprecated site-local (is_global says True)
    "fc00::1",  # unique local
    "fd12:3456:789a::1",
    "ff02::1",  # multicast
    "ff0e::1",
    "100::1",  # discard-only
    "2001:db8::1",  # documentation
    "3fff::1",  # documentation (RFC 9637)
    "5f00::1",  # SRv6 SIDs
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::8.8.8.8",
    "64:ff9b::10.0.0.1",  # NAT64 to a private address
    "64:ff9b::127.0.0.1",
    "64:ff9b:1::8.8.8.8",  # local-use NAT64 prefix
    "2002:0a00:0001::",  # 6to4 embedding 10.0.0.1
    "2002:7f00:0001::1",  # 6to4 embedding 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 embedding 169.254.169.254
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "2001:20::1",  # ORCHIDv2
]

PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "172.15.255.255",  # just below 172.16/12
    "172.32.0.1",  # just above
    "100.63.255.255",  # just below CGNAT
    "100.128.0.1",  # just above
    "2001:4860:4860::8888",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",  # IPv4-mapped: judged by the embedded IPv4 address
    "64:ff9b::8.8.8.8",  # NAT64 well-known prefix to a public address
    "2002:0808:0808::1",  # 6to4 embedding 8.8.8.8
]


@pytest.mark.parametrize("text", NON_PUBLIC)
def test_non_public_addresses(text: str) -> None:
    assert is_public_address(ip_address(text)) is False


@pytest.mark.parametrize("text", PUBLIC)
def test_public_addresses(text: str) -> None:
    assert is_public_address(ip_address(text)) is True


@pytest.mark.parametrize(
    ("text", "embedded"),
    [
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("::ffff:8.8.8.8", "8.8.8.8"),
        ("64:ff9b::10.0.0.1", "10.0.0.1"),
        ("2002:0a00:0001::", "10.0.0.1"),
        ("::127.0.0.1", "127.0.0.1"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"),  # RFC 4380 example
        ("2001:4860:4860::8888", None),
        ("fe80::1", None),
    ],
)
def test_embedded_ipv4(text: str, embedded: str | None) -> None:
    address = ip_address(text)
    assert isinstance(address, IPv6Address)
    assert embedded_ipv4(address) == (IPv4Address(embedded) if embedded else None)


@pytest.mark.parametrize("text", ["agent.test", "127.1", "0x7f.0.0.1", "2130706433", "[::1]", ""])
def test_parse_ip_accepts_only_canonical_literals(text: str) -> None:
    assert parse_ip(text) is None


def test_parse_ip_parses_literals() -> None:
    assert parse_ip("127.0.0.1") == IPv4Address("127.0.0.1")
    assert parse_ip("::1") == IPv6Address("::1")
