"""Turning a host name into IP addresses, behind a protocol tests can replace."""

from __future__ import annotations

import asyncio
import socket
from typing import Protocol

__all__ = ["Resolver", "SystemResolver"]


class Resolver(Protocol):
    """Resolves a host name to IP literals.

    Implementations raise `OSError` (for example `socket.gaierror`) when the name
    does not resolve.
    """

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` for a TCP connection to ``port``.

        Args:
            host: An ASCII (IDNA-encoded) host name.
            port: The TCP port that will be connected to.

        Returns:
            IP literals in preference order; duplicates may be present.
        """
        ...


class SystemResolver:
    """The operating system's resolver, through the running event loop."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` with ``getaddrinfo`` for TCP.

        Args:
            host: An ASCII (IDNA-encoded) host name.
            port: The TCP port that will be connected to.

        Returns:
            Distinct IP literals in the order the system returned them.
        """
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
        seen: dict[str, None] = {}
        for _family, _type, _proto, _name, sockaddr in infos:
            seen.setdefault(str(sockaddr[0]), None)
        return list(seen)
