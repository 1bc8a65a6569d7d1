"""Every key of one multi-key Redis command lands in one Redis Cluster slot (issue #15 §3).

A cluster refuses a Lua script or a MULTI/EXEC whose keys span slots (CROSSSLOT). The
key builders put the tenant in a hash tag; these tests build the keys exactly as the
commands do and compare their slots, with redis-py's own CRC16 as the reference.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from frontdoor_conversations import wakeups
from frontdoor_core.rate_limit import window_key
from frontdoor_core.redis_keys import key_slot, shard
from frontdoor_sessions.device_flow import DeviceStore
from frontdoor_sessions.replay_cache import ReplayCache
from frontdoor_sessions.token_endpoint import _agent_key
from frontdoor_tenancy import login_handoff
from redis.crc import key_slot as redis_key_slot

TENANTS = ["ten_01HZX", "ten_9", "t", "ten_01j9zq8w5x3v7k2m4n6p8r0t2v"]


@pytest.mark.parametrize("key", ["plain", "{ten_1}:a", "a:{ten_1}:b", "x{}y", "{a}{b}", "a{b", "jti:{t}:dpop:00ff"])
def test_key_slot_matches_redis_py(key: str) -> None:
    assert key_slot(key) == redis_key_slot(key.encode())


def test_shard_makes_one_whole_tag() -> None:
    assert shard("ten_1") == "{ten_1}"
    assert shard("a}b{c") == "{abc}"  # a brace inside would end the tag early
    assert key_slot(f"x:{shard('ten_1')}:y") == key_slot("{ten_1}")


def test_tenants_spread_over_slots() -> None:
    """The tag is the tenant, not a constant: different tenants land in different slots."""
    assert len({key_slot(f"tok:agent:{shard(f'ten_{i}')}:c") for i in range(200)}) > 150


class _RecordingRedis:
    """Just enough of redis.asyncio.Redis for ReplayCache: records the script's keys."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def register_script(self, _source: str) -> Any:
        async def run(*, keys: list[str], args: list[Any]) -> list[int]:
            self.calls.append(list(keys))
            return [1] * (len(keys) - 1) + [1, 60]

        return run


@pytest.mark.parametrize("tenant_id", TENANTS)
def test_token_endpoint_claims_and_agent_counter_share_a_slot(tenant_id: str) -> None:
    """claim_all_then_count: the three jti claims and the per-agent window counter, one script."""
    client_id = "https://agent.example/agent.json"
    tenant = SimpleNamespace(tenant_id=tenant_id)
    claims = [
        ("client-assertion", f"{tenant_id}\x00{client_id}", "jti-1", 60),  # client_auth.py
        ("dpop", f"{tenant_id}\x00jkt-thumbprint", "jti-2", 60),  # token_binding.py
        ("session-assertion", f"{tenant_id}\x00{client_id}", "jti-3", 60),  # session_grant.py
    ]
    counter = window_key(_agent_key(tenant, client_id), 60)  # type: ignore[arg-type]
    fake = _RecordingRedis()
    fresh, counted = asyncio.run(ReplayCache(fake).claim_all_then_count(claims, counter))  # type: ignore[arg-type]
    assert fresh == [True, True, True] and counted == (1, 60)
    (keys,) = fake.calls
    assert len(keys) == 4
    assert {key_slot(k) for k in keys} == {key_slot(shard(tenant_id))}


@pytest.mark.parametrize("tenant_id", TENANTS)
def test_ledger_and_resource_replay_scopes_use_the_tenant_tag(tenant_id: str) -> None:
    """Scopes joined with ':' (the ledger's and the delegated caller's DPoP claims) too."""
    key = ReplayCache._key("dpop-ledger", f"{tenant_id}:jkt", "jti")
    assert key.startswith(f"jti:{{{tenant_id}}}:")
    assert key_slot(key) == key_slot(shard(tenant_id))


@pytest.mark.parametrize("tenant_id", TENANTS)
def test_device_code_and_user_code_share_a_slot(tenant_id: str) -> None:
    """The decide script and the start's MULTI touch the device code and its user code."""
    device, user = DeviceStore._key(tenant_id, "handle"), DeviceStore._user_key(tenant_id, "WDJB-MJHT")
    assert key_slot(device) == key_slot(user) == key_slot(shard(tenant_id))


@pytest.mark.parametrize("tenant_id", TENANTS)
def test_login_request_and_response_share_a_slot(tenant_id: str) -> None:
    """The login hand-off's MULTI sets the response's jti and deletes the request's."""
    request = login_handoff._request_key(tenant_id, "request-jti")
    response = login_handoff._response_key(tenant_id, "response-jti")
    assert key_slot(request) == key_slot(response) == key_slot(shard(tenant_id))


def test_conversation_delta_key_is_tagged_by_tenant() -> None:
    """The delta list's MULTI (RPUSH, LTRIM, EXPIRE) touches one key; PUBLISH has none."""
    key = wakeups._delta_key("ten_1", "msg_1")
    assert key_slot(key) == key_slot("{ten_1}")


@pytest.mark.parametrize("tenant_id", TENANTS)
def test_console_stream_leases_share_a_slot(tenant_id: str) -> None:
    """The inbox streams' lease MULTI touches the member's and the tenant's set together."""
    from frontdoor_console.http.conversation_stream import ConversationStreams

    member, tenant = ConversationStreams._lease_keys(tenant_id, "adm_01J")
    assert member != tenant and key_slot(member) == key_slot(tenant) == key_slot(shard(tenant_id))
