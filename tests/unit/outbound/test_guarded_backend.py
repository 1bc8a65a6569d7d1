"""The connect-time guard: one resolution, every answer checked, dial the checked IP."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import httpcore
import pytest
from frontdoor_core.outbound import AddressRules, FetchError, FetchErrorCode, GuardedNetworkBackend, OutboundPolicy


class RecordingBackend(httpcore.AsyncMockBackend):
    """Records where it was asked to connect; optionally refuses some addresses."""

    def __init__(self, refuse: Iterable[str] = ()) -> None:
        super().__init__([])
        self.dialled: list[tuple[str, int, float | None]] = []
        self.refuse = set(refuse)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialled.append((host, port, timeout))
        if host in self.refuse:
            raise httpcore.ConnectError(f"refused by {host}")
        return await super().connect_tcp(host, port, timeout, local_address, socket_options)


class ListResolver:
    def __init__(self, *answers: list[str] | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _backend(resolver: ListResolver, inner: RecordingBackend, **policy: object) -> GuardedNetworkBackend:
    return GuardedNetworkBackend(AddressRules(OutboundPolicy(**policy)), resolver, inner)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_connects_to_the_validated_ip_literal_not_the_name() -> None:
    inner = RecordingBackend()
    resolver = ListResolver(["93.184.215.14"], ["127.0.0.1"])

    await _backend(resolver, inner).connect_tcp("Agent.Example", 443, timeout=2.0)

    assert resolver.calls == [("agent.example", 443)]
    assert inner.dialled == [("93.184.215.14", 443, 2.0)]


@pytest.mark.asyncio
async def test_each_connection_resolves_and_validates_again() -> None:
    inner = RecordingBackend()
    backend = _backend(ListResolver(["93.184.215.14"], ["127.0.0.1"]), inner)
    await backend.connect_tcp("agent.example", 443)

    with pytest.raises(FetchError) as caught:
        await backend.connect_tcp("agent.example", 443)  # rebinding on the next connection

    assert caught.value.code == FetchErrorCode.BLOCKED_ADDRESS
    assert [host for host, _, _ in inner.dialled] == ["93.184.215.14"]


@pytest.mark.asyncio
async def test_mixed_answers_dial_nothing() -> None:
    inner = RecordingBackend()
    with pytest.raises(FetchError) as caught:
        await _backend(ListResolver(["8.8.8.8", "169.254.169.254"]), inner).connect_tcp("agent.example", 443)
    assert caught.value.code == FetchErrorCode.MIXED_ANSWERS
    assert inner.dialled == []


@pytest.mark.asyncio
async def test_resolver_failure_is_dns_error() -> None:
    with pytest.raises(FetchError) as caught:
        await _backend(ListResolver(socket.gaierror(-2, "nope")), RecordingBackend()).connect_tcp("x.example", 443)
    assert caught.value.code == FetchErrorCode.DNS_ERROR


@pytest.mark.asyncio
async def test_ip_literal_hosts_skip_the_resolver_but_not_the_check() -> None:
    inner = RecordingBackend()
    resolver = ListResolver()
    backend = _backend(resolver, inner)
    await backend.connect_tcp("2001:4860:4860::8888", 443)

    with pytest.raises(FetchError) as caught:
        await backend.connect_tcp("10.0.0.1", 443)

    assert caught.value.code == FetchErrorCode.BLOCKED_ADDRESS
    assert resolver.calls == []
    assert inner.dialled == [("2001:4860:4860::8888", 443, None)]


@pytest.mark.asyncio
async def test_falls_through_to_the_next_validated_address_on_connect_error() -> None:
    inner = RecordingBackend(refuse={"2001:4860:4860::8888"})
    resolver = ListResolver(["2001:4860:4860::8888", "8.8.8.8"])

    await _backend(resolver, inner).connect_tcp("dns.example", 443)

    assert [host for host, _, _ in inner.dialled] == ["2001:4860:4860::8888", "8.8.8.8"]


@pytest.mark.asyncio
async def test_all_addresses_refusing_raises_the_connect_error() -> None:
    inner = RecordingBackend(refuse={"8.8.8.8", "8.8.4.4"})
    with pytest.raises(httpcore.ConnectError):
        await _backend(ListResolver(["8.8.8.8", "8.8.4.4"]), inner).connect_tcp("dns.example", 443)


@pytest.mark.asyncio
async def test_unix_sockets_are_refused() -> None:
    with pytest.raises(FetchError) as caught:
        await _backend(ListResolver(), RecordingBackend()).connect_unix_socket("/var/run/docker.sock")
    assert caught.value.code == FetchErrorCode.BLOCKED_ADDRESS
