"""TxtResolver against a real local authoritative DNS server (UDP and TCP on a non-53 port)."""

import time
from collections.abc import Iterator

import pytest
from frontdoor_tenancy.domains import (
    Absent,
    Found,
    Indeterminate,
    Observation,
    TxtResolver,
    challenge_name,
    challenge_value,
    match_challenge,
    new_challenge_token,
    normalize_domain,
)

from tests.support.dns_server import LocalDNS

NAME = "_frontdoor-challenge.example.com"


@pytest.fixture
def dns() -> Iterator[LocalDNS]:
    # Overrides the session-wide server: these tests assert on the query log.
    with LocalDNS() as server:
        yield server


@pytest.fixture
def resolver(dns: LocalDNS) -> TxtResolver:
    return TxtResolver(dns.nameservers, timeout=0.25, lifetime=0.6)


async def test_found_single_record(dns: LocalDNS, resolver: TxtResolver) -> None:
    value = challenge_value(new_challenge_token())
    dns.set_txt(NAME, [value])
    assert await resolver.lookup(NAME) == Found((value,))
    assert dns.port != 53


async def test_idn_domain_challenge_name_resolves(dns: LocalDNS, resolver: TxtResolver) -> None:
    name = challenge_name(normalize_domain("Bücher.example"))
    dns.set_txt("_frontdoor-challenge.xn--bcher-kva.example", ["frontdoor-verify=x"])
    assert await resolver.lookup(name) == Found(("frontdoor-verify=x",))


async def test_names_are_case_insensitive_and_trailing_dot_optional(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt("_Frontdoor-Challenge.EXAMPLE.com.", ["v"])
    assert await resolver.lookup(NAME) == Found(("v",))
    assert await resolver.lookup(NAME.upper() + ".") == Found(("v",))


async def test_multi_string_record_is_joined_without_separator(dns: LocalDNS, resolver: TxtResolver) -> None:
    token = new_challenge_token()
    dns.set_txt(NAME, [["frontdoor-verify=", token[:10], token[10:]]])
    result = await resolver.lookup(NAME)
    assert result == Found((f"frontdoor-verify={token}",))
    assert match_challenge(result, challenge_value(token)) is Observation.PRESENT


async def test_long_value_split_in_255_byte_strings_is_rejoined(dns: LocalDNS, resolver: TxtResolver) -> None:
    value = "k=" + "a" * 400
    dns.set_txt(NAME, [[value[:255], value[255:]]])
    assert await resolver.lookup(NAME) == Found((value,))


async def test_multiple_records_are_kept_separately(dns: LocalDNS, resolver: TxtResolver) -> None:
    token = new_challenge_token()
    records = ["v=spf1 -all", challenge_value(token), "frontdoor-verify=someone-else"]
    dns.set_txt(NAME, records)
    result = await resolver.lookup(NAME)
    assert isinstance(result, Found)
    assert sorted(result.values) == sorted(records)
    assert match_challenge(result, challenge_value(token)) is Observation.PRESENT
    assert match_challenge(result, challenge_value(new_challenge_token())) is Observation.ABSENT


async def test_invalid_utf8_is_replaced(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt(NAME, [b"\xff\xfeok"])
    assert await resolver.lookup(NAME) == Found(("\ufffd\ufffdok",))


async def test_large_answer_is_truncated_over_udp_and_fetched_over_tcp(dns: LocalDNS, resolver: TxtResolver) -> None:
    records = [f"record-{index}-" + "x" * 200 for index in range(8)]
    dns.set_txt(NAME, records)
    result = await resolver.lookup(NAME)
    assert isinstance(result, Found)
    assert sorted(result.values) == sorted(records)
    assert [query.transport for query in dns.queries] == ["udp", "tcp"]


async def test_nxdomain_is_absent(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt("_frontdoor-challenge.other.example", ["v"])
    assert await resolver.lookup(NAME) == Absent("nxdomain")


async def test_name_without_txt_is_absent_no_answer(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt(NAME, [])
    assert await resolver.lookup(NAME) == Absent("no_answer")


async def test_empty_non_terminal_is_absent_no_answer(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt("deeper." + NAME, ["v"])
    assert await resolver.lookup(NAME) == Absent("no_answer")


async def test_records_change_at_run_time(dns: LocalDNS, resolver: TxtResolver) -> None:
    value = challenge_value(new_challenge_token())
    assert match_challenge(await resolver.lookup(NAME), value) is Observation.ABSENT
    dns.set_txt(NAME, ["unrelated"])
    assert match_challenge(await resolver.lookup(NAME), value) is Observation.ABSENT
    dns.add_txt(NAME, value)
    assert match_challenge(await resolver.lookup(NAME), value) is Observation.PRESENT
    dns.remove(NAME)
    assert await resolver.lookup(NAME) == Absent("nxdomain")


async def test_servfail_is_indeterminate(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt(NAME, ["frontdoor-verify=x"])  # a failing server says nothing, whatever it holds
    dns.fail(NAME, "servfail")
    result = await resolver.lookup(NAME)
    assert result == Indeterminate("servfail")
    assert match_challenge(result, "frontdoor-verify=x") is Observation.UNKNOWN
    dns.fail(NAME, None)
    assert await resolver.lookup(NAME) == Found(("frontdoor-verify=x",))


async def test_refused_is_indeterminate(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.fail(NAME, "refused")
    assert await resolver.lookup(NAME) == Indeterminate("refused")


async def test_no_answer_at_all_times_out_as_indeterminate(dns: LocalDNS, resolver: TxtResolver) -> None:
    dns.set_txt(NAME, ["frontdoor-verify=x"])
    dns.fail(NAME, "timeout")
    started = time.monotonic()
    result = await resolver.lookup(NAME)
    elapsed = time.monotonic() - started
    assert result == Indeterminate("timeout")
    assert match_challenge(result, "frontdoor-verify=x") is Observation.UNKNOWN
    assert 0.5 < elapsed < 1.5
    assert len(dns.queries) >= 2  # retried within the lifetime


async def test_next_nameserver_answers_when_the_first_fails(dns: LocalDNS) -> None:
    with LocalDNS() as healthy:
        dns.fail(NAME, "servfail")
        healthy.set_txt(NAME, ["frontdoor-verify=x"])
        resolver = TxtResolver([*dns.nameservers, *healthy.nameservers], timeout=0.25, lifetime=0.6)
        assert await resolver.lookup(NAME) == Found(("frontdoor-verify=x",))
        assert len(dns.queries) == 1
        assert len(healthy.queries) == 1


async def test_unreachable_nameserver_is_indeterminate() -> None:
    with LocalDNS() as stopped:
        nameservers = stopped.nameservers
    resolver = TxtResolver(nameservers, timeout=0.2, lifetime=0.5)
    result = await resolver.lookup(NAME)
    assert isinstance(result, Indeterminate)
    assert result.reason in {"error", "timeout"}


async def test_invalid_name_is_a_programming_error(resolver: TxtResolver) -> None:
    with pytest.raises(ValueError, match="DNS name"):
        await resolver.lookup("a" * 64 + ".example.com")


@pytest.mark.parametrize(
    ("nameservers", "timeout", "lifetime"),
    [([], 1.0, 1.0), ([("127.0.0.1", 5353)], 0.0, 1.0), ([("127.0.0.1", 5353)], 1.0, -1.0)],
)
def test_resolver_refuses_bad_configuration(
    nameservers: list[tuple[str, int]], timeout: float, lifetime: float
) -> None:
    with pytest.raises(ValueError, match="must"):
        TxtResolver(nameservers, timeout=timeout, lifetime=lifetime)


def test_local_dns_refuses_oversized_character_strings() -> None:
    with LocalDNS() as server, pytest.raises(ValueError, match="255"):
        server.set_txt(NAME, ["a" * 256])
