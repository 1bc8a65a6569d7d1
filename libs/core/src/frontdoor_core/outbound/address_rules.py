"""Which addresses a given host may connect to: public ones, plus the policy's exceptions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from ipaddress import IPv4Network, IPv6Network, ip_network

from .address import IPAddress, is_public_address, parse_ip
from .fetch_error import FetchError, FetchErrorCode
from .policy import OutboundPolicy

__all__ = ["AddressRules", "is_loopback_host"]

_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
    r"(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` names the local machine (RFC 6761 ``localhost`` or a literal).

    Args:
        host: A lower-case host name or an IP literal without brackets.

    Returns:
        True for ``localhost``, ``*.localhost`` and loopback IP literals.
    """
    if host == "localhost" or host.endswith(".localhost"):
        return True
    literal = parse_ip(host)
    return literal is not None and literal.is_loopback


class AddressRules:
    """The address half of an `OutboundPolicy`, compiled once.

    An address is permitted for a host when it is public, when the host or the
    address is allowlisted, or (development mode only) when a loopback host resolves
    to a loopback address.
    """

    def __init__(self, policy: OutboundPolicy) -> None:
        """Compile the policy's allowlist.

        Args:
            policy: The outbound policy.

        Raises:
            ValueError: An allowlist entry is neither a CIDR network nor a host name.
        """
        networks: list[IPv4Network | IPv6Network] = []
        hosts: set[str] = set()
        for entry in policy.allowlist:
            text = entry.strip().lower()
            if parse_ip(text.split("/", 1)[0]) is not None:
                networks.append(ip_network(text, strict=False))
            elif _HOST_NAME.match(text):
                hosts.add(text)
            else:
                raise ValueError(f"allowlist entry is not a network or host: {entry!r}")
        self._networks = tuple(networks)
        self._hosts = frozenset(hosts)
        self._loopback = policy.allow_http_loopback

    def permits(self, host: str, address: IPAddress) -> bool:
        """Whether a connection for ``host`` may go to ``address``.

        Args:
            host: The lower-case host from the URL (name or literal).
            address: A candidate address for it.

        Returns:
            True when the address may be connected to.
        """
        if host in self._hosts or any(address in n for n in self._networks):
            return True
        if self._loopback and address.is_loopback and is_loopback_host(host):
            return True
        return is_public_address(address)

    def check_answers(self, host: str, answers: Sequence[str]) -> list[IPAddress]:
        """Validate every address a host resolved to; all must be permitted.

        One bad answer refuses the whole set: a resolver that mixes a public
        address with an internal one is either misconfigured or attacking, and
        trying the public one first would still leave the internal one reachable
        on a retry.

        Args:
            host: The lower-case host that was resolved.
            answers: The resolver's answers, as IP literals.

        Returns:
            The parsed addresses, in the resolver's order.

        Raises:
            FetchError: ``dns_error`` when there is no usable answer,
                ``blocked_address`` when every answer is refused, ``mixed_answers``
                when only some are.
        """
        parsed: list[IPAddress] = []
        for answer in answers:
            address = parse_ip(answer)
            if address is None:
                raise FetchError(FetchErrorCode.DNS_ERROR, f"{host}: unusable answer")
            parsed.append(address)
        if not parsed:
            raise FetchError(FetchErrorCode.DNS_ERROR, f"{host}: no addresses")
        refused = [a for a in parsed if not self.permits(host, a)]
        if refused and len(refused) == len(parsed):
            raise FetchError(FetchErrorCode.BLOCKED_ADDRESS, f"{host} resolves to a non-public address")
        if refused:
            raise FetchError(
                FetchErrorCode.MIXED_ANSWERS,
                f"{host} resolves to both public and non-public addresses",
            )
        return parsed
