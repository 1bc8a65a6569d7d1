"""Address rules: public addresses plus the policy's allowlist and development exception."""

from __future__ import annotations

from ipaddress import ip_address

import pytest
from frontdoor_core.outbound import AddressRules, FetchError, FetchErrorCode, OutboundPolicy, is_loopback_host


def _rules(**kwargs: object) -> AddressRules:
    return AddressRules(OutboundPolicy(**kwargs))  # type: ignore[arg-type]


def test_default_rules_permit_only_public_addresses() -> None:
    rules = _rules()
    assert rules.permits("agent.example", ip_address("8.8.8.8"))
    assert not rules.permits("agent.example", ip_address("127.0.0.1"))
    assert not rules.permits("localhost", ip_address("127.0.0.1"))


def test_network_allowlist_permits_addresses_inside_it_only() -> None:
    rules = _rules(allowlist=("127.0.0.1/32", "10.1.0.0/16"))
    assert rules.permits("agent.test", ip_address("127.0.0.1"))
    assert rules.permits("agent.test", ip_address("10.1.2.3"))
    assert not rules.permits("agent.test", ip_address("127.0.0.2"))
    assert not rules.permits("agent.test", ip_address("10.2.0.1"))


def test_host_allowlist_permits_any_address_for_that_exact_host() -> None:
    rules = _rules(allowlist=("Internal.Example",))
    assert rules.permits("internal.example", ip_address("10.0.0.1"))
    assert not rules.permits("sub.internal.example", ip_address("10.0.0.1"))
    assert not rules.permits("other.example", ip_address("10.0.0.1"))


def test_development_mode_permits_loopback_addresses_for_loopback_hosts_only() -> None:
    rules = _rules(allow_http_loopback=True)
    assert rules.permits("localhost", ip_address("127.0.0.1"))
    assert rules.permits("api.localhost", ip_address("::1"))
    assert not rules.permits("localhost", ip_address("10.0.0.1"))
    assert not rules.permits("agent.test", ip_address("127.0.0.1"))


@pytest.mark.parametrize("entry", ["not a host", "10.0.0.0/33", "http://x", ""])
def test_malformed_allowlist_entries_are_refused_at_start_up(entry: str) -> None:
    with pytest.raises(ValueError):
        _rules(allowlist=(entry,))


@pytest.mark.parametrize(
    ("answers", "code"),
    [
        (["127.0.0.1"], FetchErrorCode.BLOCKED_ADDRESS),
        (["10.0.0.1", "::1"], FetchErrorCode.BLOCKED_ADDRESS),
        (["8.8.8.8", "10.0.0.1"], FetchErrorCode.MIXED_ANSWERS),
        (["10.0.0.1", "8.8.8.8"], FetchErrorCode.MIXED_ANSWERS),
        (["2001:4860:4860::8888", "::ffff:127.0.0.1"], FetchErrorCode.MIXED_ANSWERS),
        ([], FetchErrorCode.DNS_ERROR),
        (["not-an-ip"], FetchErrorCode.DNS_ERROR),
    ],
)
def test_check_answers_refuses_any_non_public_answer(answers: list[str], code: FetchErrorCode) -> None:
    with pytest.raises(FetchError) as caught:
        _rules().check_answers("agent.example", answers)
    assert caught.value.code == code


def test_check_answers_returns_every_permitted_address_in_order() -> None:
    assert _rules().check_answers("agent.example", ["8.8.8.8", "2001:4860:4860::8888"]) == [
        ip_address("8.8.8.8"),
        ip_address("2001:4860:4860::8888"),
    ]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("a.localhost", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost.example", False),
        ("mylocalhost", False),
        ("10.0.0.1", False),
    ],
)
def test_is_loopback_host(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback
