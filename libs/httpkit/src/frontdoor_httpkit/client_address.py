"""The address a request came from, for rate limits, behind trusted proxies.

The TCP peer is the client unless it is one of the proxies the operator trusts
(``FRONTDOOR_TRUSTED_PROXIES``). Then ``X-Forwarded-For`` is read right to left, skipping
trusted proxies, and the first other address is the client: values further left were
written by the client itself and prove nothing. Without trusted proxies the header is
ignored, so a client cannot choose its own rate-limit bucket.

What comes back is the client's *network key* (`network_key`), not its bare address: an
IPv6 client is counted by its /64, since one subscriber usually holds a whole /64 and
could otherwise rotate through 2^64 addresses to get a fresh bucket each time; an IPv4
client (and an IPv4-mapped IPv6 one) by its /32.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from litestar import Request

__all__ = ["client_address", "client_address_from", "network_key", "parse_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=32)
def parse_networks(spec: str) -> tuple[Network, ...]:
    """``"10.0.0.0/8, 127.0.0.1"`` → networks (invalid entries raise ValueError)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip())


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    return any(ip in net for net in networks)


IPV6_PREFIX = 64


def network_key(address: str) -> str:
    """The rate-limit bucket of an address: IPv4 as is (/32), IPv6 as its /64.

    ``"2001:db8:1:2:aaaa::1"`` → ``"2001:db8:1:2::/64"``; ``"::ffff:192.0.2.1"`` →
    ``"192.0.2.1"`` (the same client as its IPv4 form); a zone (``%eth0``) and brackets
    are dropped. Anything that is not an IP address (``"unknown"``, a test client's name)
    is kept, cut to 64 characters.
    """
    text = address.strip().strip("[]").split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address.strip()[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped
        if mapped is not None:
            return str(mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False))
    return str(ip)


def client_address(request: Request[Any, Any, Any], trusted_proxies: str = "") -> str:
    """The client's network key for rate limiting (never trusted for anything else)."""
    peer = request.client.host if request.client else "unknown"
    return client_address_from(peer, request.headers.getall("x-forwarded-for", []), trusted_proxies)


def client_address_from(peer: str, forwarded_for: Sequence[str], trusted_proxies: str = "") -> str:
    """:func:`client_address` from the TCP peer and the ``X-Forwarded-For`` fields as sent (a lean ASGI route)."""
    networks = parse_networks(trusted_proxies) if trusted_proxies else ()
    if not networks or not _trusted(peer, networks):
        return network_key(peer)
    hops = [h.strip() for h in ",".join(forwarded_for).split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, networks):
            return network_key(hop[:64])
    return network_key(peer)
