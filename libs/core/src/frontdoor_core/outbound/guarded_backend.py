"""An httpcore network backend that connects only to addresses it has just validated.

This is where the SSRF defence actually holds. httpcore hands `connect_tcp` the host
name from the URL; this backend resolves it once, checks every answer against the
`AddressRules`, and dials the checked IP literal, so a DNS answer that changes between
a check and the connect (rebinding) never reaches a socket. TLS is layered afterwards
by httpcore with ``server_hostname`` taken from the request's origin, so SNI and the
certificate hostname check still use the original name, not the IP.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpcore

from .address import parse_ip
from .address_rules import AddressRules
from .fetch_error import FetchError, FetchErrorCode
from .resolver import Resolver

__all__ = ["GuardedNetworkBackend"]

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """Wraps a real backend; resolves, validates, then connects to an IP literal."""

    def __init__(
        self,
        rules: AddressRules,
        resolver: Resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        """Create the backend.

        Args:
            rules: Which addresses each host may reach.
            resolver: Name resolution; called exactly once per connection attempt.
            inner: The backend that opens sockets; httpcore's `AnyIOBackend` when None.
        """
        self._rules = rules
        self._resolver = resolver
        self._inner = inner if inner is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Resolve ``host``, validate every address, connect to a validated one.

        Args:
            host: The host from the request origin (name or IP literal).
            port: The TCP port.
            timeout: Per-attempt connect timeout in seconds.
            local_address: Passed through to the inner backend.
            socket_options: Passed through to the inner backend.

        Returns:
            A stream connected to a permitted address.

        Raises:
            FetchError: ``dns_error``, ``blocked_address`` or ``mixed_answers``.
            httpcore.ConnectError: No permitted address accepted the connection.
            httpcore.ConnectTimeout: The last attempt timed out.
        """
        name = host.lower()
        literal = parse_ip(name)
        if literal is not None:
            answers = [name]
        else:
            try:
                answers = await self._resolver.resolve(name, port)
            except OSError as exc:
                raise FetchError(FetchErrorCode.DNS_ERROR, f"{name} does not resolve ({exc})") from None
        addresses = self._rules.check_answers(name, answers)
        options = list(socket_options) if socket_options is not None else None
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        if last_error is None:  # unreachable: check_answers never returns []
            raise FetchError(FetchErrorCode.CONNECT_ERROR, f"{name}: nothing to dial")
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Refuse: untrusted fetches never reach local sockets.

        Raises:
            FetchError: Always, ``blocked_address``.
        """
        raise FetchError(FetchErrorCode.BLOCKED_ADDRESS, "unix sockets are refused")

    async def sleep(self, seconds: float) -> None:
        """Sleep through the inner backend (used by httpcore between retries).

        Args:
            seconds: How long to sleep.
        """
        await self._inner.sleep(seconds)
