"""The sdk's 1.0 way remembers verified delegations (ADR 0004 §3 step 4) and its replay cache
stays O(1) per request however many ``jti`` values it holds.

Against the fake Frontdoor of :mod:`.pap10_kit`: the cache is the verifier's own
:class:`frontdoor_protocol.DelegationCache`; what is checked is what the company would
answer (a Caller, or the 400 ``invalid_session`` refusal).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from frontdoor_protocol import delegation as delegation_module
from frontdoor_sdk import Caller, FrontdoorVerifier, InMemoryReplayCache, Refusal
from joserfc.jwk import ECKey

from .kit import API_URL, CREDENTIAL, ISSUER, Clock
from .pap10_kit import Agent10, Fake10


@pytest.fixture
def fake() -> Fake10:
    return Fake10()


@pytest.fixture
def fake_clock() -> Clock:
    return Clock()


@pytest.fixture
async def verifier(fake: Fake10, fake_clock: Clock) -> AsyncIterator[FrontdoorVerifier]:
    async with fake.client() as http:
        yield FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)


@pytest.fixture
def signature_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = delegation_module.signature_verifies

    def counting(jws: Any, key: Any) -> bool:
        calls.append(1)
        return real(jws, key)

    monkeypatch.setattr(delegation_module, "signature_verifies", counting)
    return calls


def _now(clock: Clock) -> int:
    return int(clock.now.timestamp())


async def test_the_agents_delegation_is_verified_once(
    verifier: FrontdoorVerifier, fake: Fake10, signature_checks: list[int]
) -> None:
    agent = Agent10(fake)
    for _ in range(3):
        assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
    assert len(signature_checks) == 1
    assert len(fake.state_asks) == 3  # every request still asks for the Session's state


async def test_a_cached_delegation_is_refused_once_expired(
    verifier: FrontdoorVerifier, fake: Fake10, fake_clock: Clock
) -> None:
    """The delegation expires at fake.now + 3600; the next request after that (and the skew) is refused."""
    agent = Agent10(fake)
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
    fake_clock.advance(3600 + 61)
    outcome = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, iat=_now(fake_clock)))
    assert isinstance(outcome, Refusal) and (outcome.status, outcome.error) == (400, "invalid_session")


async def test_a_rotated_identity_key_misses_the_cache(
    verifier: FrontdoorVerifier, fake: Fake10, fake_clock: Clock, signature_checks: list[int]
) -> None:
    """The agent's JWKS now has another key under the same kid: the delegation is verified again, and fails."""
    agent = Agent10(fake)
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
    fake.identity[agent.client_id] = [ECKey.generate_key("P-256", parameters={"kid": "id1"})]
    fake_clock.advance(fake.max_age + 1)  # the sdk asks agent-keys again
    outcome = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, iat=_now(fake_clock)))
    assert isinstance(outcome, Refusal) and (outcome.status, outcome.error) == (400, "invalid_session")
    assert len(signature_checks) == 2


class _CountingDict(dict[str, int]):
    """Counts the entries the replay cache's housekeeping walks through."""

    walked = 0

    def items(self) -> Any:
        for pair in super().items():
            _CountingDict.walked += 1
            yield pair


async def test_the_replay_cache_purge_walks_at_most_64_entries() -> None:
    """A regression: the purge copied every entry on each request (O(entries) per request)."""
    clock = Clock()
    until = int(clock.now.timestamp()) + 60
    cache = InMemoryReplayCache(clock=clock)
    for i in range(5000):
        assert await cache.first_use(f"k{i}", until=until)
    cache._entries = _CountingDict(cache._entries)
    _CountingDict.walked = 0
    assert await cache.first_use("fresh", until=until)
    assert _CountingDict.walked <= 64
    assert len(cache) == 5001


async def test_the_replay_cache_still_purges_expired_entries() -> None:
    clock = Clock()
    start = int(clock.now.timestamp())
    cache = InMemoryReplayCache(clock=clock)
    for i in range(100):
        assert await cache.first_use(f"k{i}", until=start + 10)
    clock.advance(20)
    assert await cache.first_use("x", until=start + 100)
    assert len(cache) == 100 - 64 + 1  # the 64 oldest expired entries went on this call
    assert await cache.first_use("y", until=start + 100)
    assert len(cache) == 2
