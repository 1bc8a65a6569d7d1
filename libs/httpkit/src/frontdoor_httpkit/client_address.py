"""The address a request came from, for rate limits, behind trusted proxies.

The TCP peer is the client unless it is one of the proxies the operator trusts
(``FRONTDOOR_TRUSTED_PROXIES``). Then ``X-Forwarded-For`` is read right to left, skipping
trusted proxies, and the first other address is the client: values further left were
written by the client itself and prove nothing. Without trusted proxies the header is
ignored, so a client cannot choose its own rate-limit bucket.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from litestar import Request

__all__ = ["client_address", "parse_networks"]

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


def client_address(request: Request[Any, Any, Any], trusted_proxies: str = "") -> str:
    """The client's address for rate limiting (never trusted for anything else)."""
    peer = request.client.host if request.client else "unknown"
    networks = parse_networks(trusted_proxies) if trusted_proxies else ()
    if not networks or not _trusted(peer, networks):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getall("x-forwarded-for", [])).split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, networks):
            return hop[:64]
    return peer
