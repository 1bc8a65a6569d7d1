"""PAP-3-10 with real sockets: a client_id whose host resolves to a non-public address is
refused before any connection, by the real SafeFetcher (no allowlist, no mock transport)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest
from frontdoor_core.clock import utc_now
from frontdoor_core.outbound import FetchErrorCode, OutboundPolicy, SafeFetcher
from frontdoor_identity import AgentDirectory, ClientResolutionError


class MapResolver:
    """Answers from a table; records every lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(self.table[host])


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        writer.close()


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    lst = Listener()
    server = await asyncio.start_server(lst._accept, "127.0.0.1", 0)
    lst.port = server.sockets[0].getsockname()[1]
    async with server:
        yield lst


def _directory(resolver: MapResolver) -> AgentDirectory:
    policy = OutboundPolicy(total_timeout=2.0, connect_timeout=1.0)
    assert policy.allowlist == () and not policy.allow_http_loopback
    return AgentDirectory(SafeFetcher(policy, resolver=resolver), utc_now)


async def test_the_listener_is_reachable_so_a_refusal_proves_something(listener: Listener) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
    await reader.read()
    writer.close()
    assert listener.accepted == 1


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.1", "169.254.169.254", "::1", "::ffff:127.0.0.1", "fd00::1"])
async def test_pap_3_10_a_host_resolving_to_a_non_public_address_is_refused(listener: Listener, address: str) -> None:
    resolver = MapResolver({"agent.test": [address]})
    client_id = f"https://agent.test:{listener.port}/agent.json"

    with pytest.raises(ClientResolutionError) as caught:
        await _directory(resolver).get_client(client_id)

    assert (caught.value.reason, caught.value.stage) == (FetchErrorCode.BLOCKED_ADDRESS, "client_metadata")
    assert caught.value.requirement == "PAP-3-10"
    assert resolver.calls == [("agent.test", listener.port)]
    assert listener.accepted == 0


async def test_guide_fetch_03_a_public_and_a_private_answer_together_are_refused(listener: Listener) -> None:
    resolver = MapResolver({"agent.test": ["93.184.215.14", "127.0.0.1"]})

    with pytest.raises(ClientResolutionError) as caught:
        await _directory(resolver).get_client(f"https://agent.test:{listener.port}/agent.json")

    assert caught.value.reason is FetchErrorCode.MIXED_ANSWERS
    assert listener.accepted == 0


async def test_a_loopback_ip_literal_is_refused_without_resolving(listener: Listener) -> None:
    resolver = MapResolver({})

    with pytest.raises(ClientResolutionError) as caught:
        await _directory(resolver).get_client(f"https://127.0.0.1:{listener.port}/agent.json")

    assert caught.value.reason is FetchErrorCode.BLOCKED_ADDRESS
    assert resolver.calls == [] and listener.accepted == 0


async def test_the_refusal_is_remembered_so_a_stream_of_requests_resolves_once(listener: Listener) -> None:
    resolver = MapResolver({"agent.test": ["10.0.0.1"]})
    agents = _directory(resolver)
    for _ in range(5):
        with pytest.raises(ClientResolutionError):
            await agents.get_client(f"https://agent.test:{listener.port}/agent.json")
    assert len(resolver.calls) == 1
