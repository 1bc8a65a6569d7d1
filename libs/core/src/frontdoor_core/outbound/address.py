"""Classifying IP addresses: may Frontdoor open a connection to this one?

`ipaddress.is_global` alone is not enough on Python 3.11: it calls multicast, 6to4
embedding a private IPv4, IPv4-mapped, NAT64 local-use and site-local addresses
"global". So the rule here is positive: an IPv4 address is public when it is global and
outside every special-purpose block; an IPv6 address is public when it is global
unicast (``2000::/3``), outside the special blocks, and any IPv4 address it embeds is
public too (IANA special-purpose registries, RFC 6890).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

__all__ = ["IPAddress", "embedded_ipv4", "is_public_address", "parse_ip"]

IPAddress = IPv4Address | IPv6Address

# Special-purpose IPv4 blocks (RFC 6890 and successors). Some overlap `is_global`;
# listing them makes the rule independent of the Python patch release.
_BLOCKED_V4 = tuple(
    IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network", includes the unspecified address
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared address space (CGNAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata endpoints
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation TEST-NET-1
        "192.88.99.0/24",  # deprecated 6to4 relay anycast (RFC 7526)
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation TEST-NET-2
        "203.0.113.0/24",  # documentation TEST-NET-3
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes limited broadcast
    )
)

_GLOBAL_UNICAST_V6 = IPv6Network("2000::/3")
_BLOCKED_V6 = tuple(
    IPv6Network(n)
    for n in (
        "2001::/23",  # IETF protocol assignments, includes Teredo 2001::/32
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
    )
)
_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")  # RFC 6052; embeds an IPv4 address
_SIX_TO_FOUR = IPv6Network("2002::/16")  # RFC 3056; embeds an IPv4 address


def parse_ip(text: str) -> IPAddress | None:
    """Parse an IP literal, or return None when ``text`` is not one.

    Args:
        text: A candidate address, without URL brackets.

    Returns:
        The address, or None for anything `ipaddress` does not accept (host names,
        and shorthand forms such as ``127.1`` or ``0x7f.0.0.1``, which are not
        literals here).
    """
    try:
        return ip_address(text)
    except ValueError:
        return None


def embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries, when it carries one.

    Covers IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``),
    NAT64 well-known prefix (``64:ff9b::a.b.c.d``), 6to4 (``2002:AABB:CCDD::``) and
    Teredo (the obfuscated client address).

    Args:
        address: Any IPv6 address.

    Returns:
        The embedded IPv4 address, or None.
    """
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64_WELL_KNOWN or int(address) >> 32 == 0:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _is_public_v4(address: IPv4Address) -> bool:
    return address.is_global and not any(address in n for n in _BLOCKED_V4)


def _is_public_v6(address: IPv6Address) -> bool:
    if address.scope_id is not None:
        return False  # a zone only means something on a local link
    if address.ipv4_mapped is not None:
        # The socket layer connects mapped addresses over IPv4: judge what it reaches.
        return _is_public_v4(address.ipv4_mapped)
    if address in _NAT64_WELL_KNOWN:
        # The NAT64 gateway forwards to the embedded IPv4 address.
        return _is_public_v4(IPv4Address(int(address) & 0xFFFFFFFF))
    if address not in _GLOBAL_UNICAST_V6 or any(address in n for n in _BLOCKED_V6):
        # Outside 2000::/3 lie ::, ::1, IPv4-compatible, 64:ff9b:1::/48, 100::/64,
        # 5f00::/16, ULA fc00::/7, link-local fe80::/10, site-local, multicast.
        return False
    if address.sixtofour is not None:
        return _is_public_v4(address.sixtofour)
    return address.is_global


def is_public_address(address: IPAddress) -> bool:
    """Whether ``address`` is a publicly routable unicast address.

    Args:
        address: An IPv4 or IPv6 address.

    Returns:
        False for loopback, private, link-local, unique-local, multicast, reserved,
        unspecified, CGNAT, documentation and benchmarking addresses, and for IPv6
        addresses that embed a non-public IPv4 address; True otherwise.
    """
    if isinstance(address, IPv4Address):
        return _is_public_v4(address)
    return _is_public_v6(address)
