"""What address a URL's host means to a browser or a libc resolver, however it is spelt.

``https://127.1``, ``https://2130706433``, ``https://0x7f000001``, ``https://0177.0.0.1``,
``https://127.0.0.1.``, fullwidth ``https://１２７.０.０.１`` and ``https://[::ffff:7f00:1]``
all reach 127.0.0.1 through some client or resolver, although `ipaddress` accepts none of
them but the last. `host_address` parses a host the way the WHATWG URL Standard does
(percent-decoding, UTS 46 mapping, the IPv4 number parser with hex, octal and shorthand
parts), so a check on the address cannot be dodged by the spelling.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv6Address
from urllib.parse import unquote

import idna

from .address import IPAddress, parse_ip

__all__ = ["host_address", "url_host"]

_NUMBER = re.compile(r"^(?:0[xX][0-9a-fA-F]*|[0-9]+)$")


def url_host(url: str) -> str | None:
    """The raw host text of an absolute ``scheme://`` URL, brackets kept; None without one.

    Splits the authority like the WHATWG parser of a special scheme: it ends at the first
    ``/``, ``?``, ``#`` or ``\\``; user information ends at the last ``@``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        return None
    authority = re.split(r"[/?#\\]", rest, maxsplit=1)[0]
    host_port = authority.rpartition("@")[2]
    if host_port.startswith("["):
        end = host_port.find("]")
        return host_port[: end + 1] if end >= 0 else host_port
    return host_port.rsplit(":", 1)[0] if ":" in host_port else host_port


def _ipv4_number(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8) if all(c in "01234567" for c in part) else None
    return int(part)


def _ipv4(host: str) -> IPv4Address | None:
    """The WHATWG IPv4 parser: None when ``host`` does not end in a number or is no address."""
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    if not parts or not _NUMBER.match(parts[-1]):
        return None
    if len(parts) > 4 or not all(_NUMBER.match(p) for p in parts):
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if any(n is None for n in numbers):
        return None
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return None
    address = values[-1]
    for i, n in enumerate(values[:-1]):
        address += n * 256 ** (3 - i)
    return IPv4Address(address)


def host_address(host: str) -> IPAddress | None:
    """The IP address ``host`` denotes in any accepted spelling, or None for a name.

    Args:
        host: A URL's host text as written (``url_host``), brackets allowed.

    Returns:
        The address (an IPv4-mapped IPv6 literal stays IPv6: the address rules look at
        what it embeds), or None when the host is a DNS name or unparsable.
    """
    text = unquote(host.strip())
    if text.startswith("[") and text.endswith("]"):
        literal = parse_ip(text[1:-1].split("%", 1)[0])
        return literal if isinstance(literal, IPv6Address) else None
    try:
        mapped = idna.uts46_remap(text, std3_rules=False, transitional=False)
    except (idna.IDNAError, ValueError):
        mapped = text
    mapped = mapped.lower()
    if mapped in ("localhost", "localhost.") or mapped.rstrip(".").endswith(".localhost"):
        # RFC 6761: always the loopback address, whatever DNS would say
        return IPv4Address("127.0.0.1")
    return _ipv4(mapped)
