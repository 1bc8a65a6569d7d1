"""is_allowed: open or allowlist mode, and the blocklist always wins."""

from __future__ import annotations

import pytest
from frontdoor_core.errors import Invalid
from frontdoor_identity import AgentPolicy, PolicyMode, is_allowed, require_client_id_url

A = "https://a.example/agent.json"
B = "https://b.example/agent.json"


def test_open_is_the_default_and_accepts_any_agent() -> None:
    assert AgentPolicy().mode is PolicyMode.OPEN
    assert is_allowed(AgentPolicy(), A)


def test_allowlist_mode_accepts_only_listed_agents() -> None:
    policy = AgentPolicy(mode=PolicyMode.ALLOWLIST, allowlist=frozenset({A}))
    assert is_allowed(policy, A)
    assert not is_allowed(policy, B)
    assert not is_allowed(AgentPolicy(mode=PolicyMode.ALLOWLIST), A)


def test_client_ids_compare_exactly() -> None:
    policy = AgentPolicy(mode=PolicyMode.ALLOWLIST, allowlist=frozenset({A}))
    assert not is_allowed(policy, A.upper())
    assert not is_allowed(policy, A + "/")


@pytest.mark.parametrize("mode", list(PolicyMode))
def test_the_blocklist_wins_in_every_mode(mode: PolicyMode) -> None:
    policy = AgentPolicy(mode=mode, allowlist=frozenset({A, B}), blocklist=frozenset({A}))
    assert not is_allowed(policy, A)
    assert is_allowed(policy, B)


@pytest.mark.parametrize("value", ["a.example", "http://a.example/agent.json", "https://a.example/#f", ""])
def test_only_agent_urls_can_be_listed(value: str) -> None:
    with pytest.raises(Invalid) as caught:
        require_client_id_url(value)
    assert caught.value.code == "invalid_client_id"


def test_a_development_agent_on_loopback_can_be_listed() -> None:
    assert require_client_id_url("http://127.0.0.1:8001/agent.json") == "http://127.0.0.1:8001/agent.json"
