"""Agent policy and the agents seen, on real PostgreSQL, including two-tenant isolation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from frontdoor_core.errors import Conflict, Invalid
from frontdoor_identity import (
    MAX_ALLOWLIST,
    AgentPolicy,
    PolicyMode,
    allow_agent,
    block_agent,
    disallow_agent,
    get_agent,
    get_agent_policy,
    is_allowed,
    list_agents,
    record_seen,
    set_agent_policy_mode,
    unblock_agent,
)

from tests.integration.conftest import TenantHandle, sign_up

A = "https://a.example/agent.json"
B = "https://b.example/agent.json"
C = "https://c.example/agent.json"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def test_a_new_tenant_is_open_with_empty_lists(db: Any, tenant: TenantHandle) -> None:
    assert await get_agent_policy(db, tenant.id) == AgentPolicy()
    assert await get_agent_policy(db, tenant.id, client_id=A) == AgentPolicy()
    assert await list_agents(db, tenant.id) == []


async def test_mode_switches_report_whether_they_changed_anything(db: Any, tenant: TenantHandle) -> None:
    assert not await set_agent_policy_mode(db, tenant.id, PolicyMode.OPEN, T0)  # already the default
    assert await set_agent_policy_mode(db, tenant.id, PolicyMode.ALLOWLIST, T0)
    assert not await set_agent_policy_mode(db, tenant.id, PolicyMode.ALLOWLIST, T0)
    assert (await get_agent_policy(db, tenant.id)).mode is PolicyMode.ALLOWLIST
    assert await set_agent_policy_mode(db, tenant.id, PolicyMode.OPEN, T0)
    assert (await get_agent_policy(db, tenant.id)).mode is PolicyMode.OPEN


async def test_allowlist_mode_accepts_only_listed_agents(db: Any, tenant: TenantHandle) -> None:
    await set_agent_policy_mode(db, tenant.id, PolicyMode.ALLOWLIST, T0)
    assert await allow_agent(db, tenant.id, A, T0)
    assert not await allow_agent(db, tenant.id, A, T0)

    assert is_allowed(await get_agent_policy(db, tenant.id, client_id=A), A)
    assert not is_allowed(await get_agent_policy(db, tenant.id, client_id=B), B)
    assert (await get_agent_policy(db, tenant.id)).allowlist == {A}

    assert await disallow_agent(db, tenant.id, A)
    assert not await disallow_agent(db, tenant.id, A)
    assert not is_allowed(await get_agent_policy(db, tenant.id, client_id=A), A)


async def test_the_policy_for_one_client_holds_only_that_client(db: Any, tenant: TenantHandle) -> None:
    for client_id in (A, B):
        await allow_agent(db, tenant.id, client_id, T0)
        await block_agent(db, tenant.id, client_id, T0)
    policy = await get_agent_policy(db, tenant.id, client_id=A)
    assert (policy.allowlist, policy.blocklist) == ({A}, {A})


async def test_the_allowlist_is_bounded(db: Any, tenant: TenantHandle) -> None:
    await db.execute(
        "INSERT INTO agent_allowlist (tenant_id, client_id, added_at)"
        " SELECT $1, 'https://a' || n || '.example/agent.json', $2 FROM generate_series(1, $3) AS n",
        tenant.id, T0, MAX_ALLOWLIST,
    )
    with pytest.raises(Conflict) as caught:
        await allow_agent(db, tenant.id, A, T0)
    assert caught.value.code == "allowlist_full"
    assert not await allow_agent(db, tenant.id, "https://a1.example/agent.json", T0)  # listed already


@pytest.mark.parametrize("client_id", ["a.example", "http://a.example/agent.json", "https://a.example/#x"])
async def test_only_agent_urls_can_be_allowed_or_blocked(db: Any, tenant: TenantHandle, client_id: str) -> None:
    with pytest.raises(Invalid):
        await allow_agent(db, tenant.id, client_id, T0)
    with pytest.raises(Invalid):
        await block_agent(db, tenant.id, client_id, T0)


async def test_record_seen_writes_at_most_once_a_minute(db: Any, tenant: TenantHandle) -> None:
    assert await record_seen(db, tenant.id, A, name="Agent A", logo=None, now=T0)
    assert not await record_seen(db, tenant.id, A, name="Agent A", logo=None, now=T0 + timedelta(seconds=59))
    agent = await get_agent(db, tenant.id, A)
    assert agent is not None
    assert (agent.first_seen_at, agent.last_seen_at, agent.client_name, agent.blocked) == (T0, T0, "Agent A", False)

    later = T0 + timedelta(seconds=60)
    assert await record_seen(db, tenant.id, A, name="Agent A", logo=None, now=later)
    agent = await get_agent(db, tenant.id, A)
    assert agent is not None and (agent.first_seen_at, agent.last_seen_at) == (T0, later)


async def test_a_new_name_or_logo_is_written_at_once(db: Any, tenant: TenantHandle) -> None:
    await record_seen(db, tenant.id, A, name="Old", logo=None, now=T0)
    logo = "https://a.example/logo.png"
    assert await record_seen(db, tenant.id, A, name="New", logo=logo, now=T0 + timedelta(seconds=5))
    agent = await get_agent(db, tenant.id, A)
    assert agent is not None and (agent.client_name, agent.logo_uri) == ("New", logo)


async def test_an_earlier_clock_never_moves_last_seen_back(db: Any, tenant: TenantHandle) -> None:
    await record_seen(db, tenant.id, A, name="A", logo=None, now=T0)
    await record_seen(db, tenant.id, A, name="A2", logo=None, now=T0 - timedelta(minutes=5))
    agent = await get_agent(db, tenant.id, A)
    assert agent is not None and agent.last_seen_at == T0


async def test_block_and_unblock_a_seen_agent(db: Any, tenant: TenantHandle) -> None:
    await record_seen(db, tenant.id, A, name="A", logo=None, now=T0)

    assert await block_agent(db, tenant.id, A, T0 + timedelta(hours=1))
    assert not await block_agent(db, tenant.id, A, T0 + timedelta(hours=2))
    agent = await get_agent(db, tenant.id, A)
    assert agent is not None and agent.blocked_at == T0 + timedelta(hours=1)
    assert not is_allowed(await get_agent_policy(db, tenant.id, client_id=A), A)

    assert await unblock_agent(db, tenant.id, A)
    assert not await unblock_agent(db, tenant.id, A)
    agent = await get_agent(db, tenant.id, A)
    assert agent is not None and not agent.blocked and agent.first_seen_at == T0
    assert is_allowed(await get_agent_policy(db, tenant.id, client_id=A), A)


async def test_an_agent_can_be_blocked_before_it_ever_calls(db: Any, tenant: TenantHandle) -> None:
    assert await block_agent(db, tenant.id, B, T0)
    (agent,) = await list_agents(db, tenant.id)
    assert (agent.client_id, agent.first_seen_at, agent.blocked) == (B, None, True)

    assert await unblock_agent(db, tenant.id, B)
    assert await get_agent(db, tenant.id, B) is None  # the row only existed to block it

    await block_agent(db, tenant.id, B, T0)
    await record_seen(db, tenant.id, B, name="B", logo=None, now=T0 + timedelta(minutes=1))
    agent_b = await get_agent(db, tenant.id, B)
    assert agent_b is not None and agent_b.blocked and agent_b.first_seen_at == T0 + timedelta(minutes=1)


async def test_list_agents_newest_first_with_filters_and_pages(db: Any, tenant: TenantHandle) -> None:
    for i, client_id in enumerate((A, B, C)):
        await record_seen(db, tenant.id, client_id, name=client_id, logo=None, now=T0 + timedelta(minutes=i))
    never_seen = "https://z.example/agent.json"
    await block_agent(db, tenant.id, never_seen, T0)
    await block_agent(db, tenant.id, A, T0)

    assert [a.client_id for a in await list_agents(db, tenant.id)] == [C, B, A, never_seen]
    assert [a.client_id for a in await list_agents(db, tenant.id, blocked=True)] == [A, never_seen]
    assert [a.client_id for a in await list_agents(db, tenant.id, blocked=False)] == [C, B]

    first = await list_agents(db, tenant.id, limit=2)
    second = await list_agents(db, tenant.id, limit=2, after=first[-1].cursor)
    third = await list_agents(db, tenant.id, limit=2, after=second[-1].cursor)
    assert [a.client_id for a in first + second] == [C, B, A, never_seen]
    assert third == []


async def test_two_tenants_block_allow_and_see_agents_independently(
    db: Any, tenant: TenantHandle, other_tenant: TenantHandle
) -> None:
    a_id, b_id = tenant.id, other_tenant.id
    await record_seen(db, a_id, A, name="A", logo=None, now=T0)
    await block_agent(db, a_id, A, T0)
    await set_agent_policy_mode(db, a_id, PolicyMode.ALLOWLIST, T0)
    await allow_agent(db, a_id, B, T0)

    # Blocked, allowlisted and seen under A: none of it exists under B.
    assert not is_allowed(await get_agent_policy(db, a_id, client_id=A), A)
    assert is_allowed(await get_agent_policy(db, b_id, client_id=A), A)
    assert await get_agent_policy(db, b_id) == AgentPolicy()
    assert await list_agents(db, b_id) == []
    assert await get_agent(db, b_id, A) is None

    # B can neither unblock nor disallow A's entries.
    assert not await unblock_agent(db, b_id, A)
    assert not await disallow_agent(db, b_id, B)
    assert not is_allowed(await get_agent_policy(db, a_id, client_id=A), A)
    assert is_allowed(await get_agent_policy(db, a_id, client_id=B), B)

    # B seeing and blocking the same agent touches only B's rows.
    await record_seen(db, b_id, A, name="A as B saw it", logo=None, now=T0 + timedelta(hours=1))
    assert await block_agent(db, b_id, C, T0)
    assert [a.client_id for a in await list_agents(db, a_id)] == [A]
    agent_in_a = await get_agent(db, a_id, A)
    assert agent_in_a is not None and (agent_in_a.client_name, agent_in_a.last_seen_at) == ("A", T0)
    assert is_allowed(await get_agent_policy(db, a_id, client_id=C), C) is False  # allowlist mode in A, C unlisted
    assert (await get_agent_policy(db, a_id)).blocklist == {A}


async def test_deleting_a_tenant_deletes_its_agents_and_policy(db: Any, console: Any) -> None:
    gone = await sign_up(console)
    await record_seen(db, gone.id, A, name="A", logo=None, now=T0)
    await allow_agent(db, gone.id, A, T0)
    await set_agent_policy_mode(db, gone.id, PolicyMode.ALLOWLIST, T0)

    await db.execute("DELETE FROM tenants WHERE id = $1", gone.id)

    for table in ("agents", "agent_allowlist", "agent_policies"):
        assert await db.fetchval(f"SELECT count(*) FROM {table} WHERE tenant_id = $1", gone.id) == 0
