"""The sdk's per-client cache of agents' identity keys (ADR 0004 §6, POST {issuer}/poppy/agent-keys)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from frontdoor_sdk.agent_keys import AgentKeysCache, AgentKeysRefused, AgentKeysUnavailable, AgentRefused
from joserfc.jwk import ECKey

from .kit import CREDENTIAL, ISSUER, Clock

URL = f"{ISSUER}/poppy/agent-keys"
A = "https://a.agent.example/client.json"
B = "https://b.agent.example/client.json"


class Keys:
    """A fake agent-keys endpoint: what it was asked, what it answers."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.keys = {A: ECKey.generate_key("P-256", parameters={"kid": "a1"}),
                     B: ECKey.generate_key("P-256", parameters={"kid": "b1"})}
        self.status = 200
        self.max_age = 300
        self.body: bytes | None = None

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert str(request.url) == URL and request.method == "POST"
        body = json.loads(request.content)
        self.asked.append({"authorization": request.headers["authorization"], **body})
        if self.status != 200:
            return httpx.Response(self.status, json={"error": "invalid_client"} if self.status == 403 else {},
                                  headers={"Retry-After": "9"})
        if self.body is not None:
            return httpx.Response(200, content=self.body)
        key = self.keys[body["client_id"]]
        return httpx.Response(200, json={"client_id": body["client_id"], "max_age": self.max_age,
                                         "keys": [key.as_dict(private=False)]})


@pytest.fixture
def fake() -> Keys:
    return Keys()


def _cache(fake: Keys, clock: Clock, **kwargs: Any) -> AgentKeysCache:
    http = httpx.AsyncClient(transport=httpx.MockTransport(fake.handle))
    return AgentKeysCache(URL, CREDENTIAL, http, clock, **kwargs)


async def test_keys_are_asked_once_with_the_credential_then_cached(fake: Keys) -> None:
    """ADR 0004 §6: {"client_id"} with the resource-server credential; kept for max_age."""
    clock = Clock()
    cache = _cache(fake, clock)
    first = await cache.keys(A)
    assert [k.kid for k in first.keys] == ["a1"]
    await cache.keys(A)
    assert fake.asked == [{"authorization": f"Bearer {CREDENTIAL}", "client_id": A}]
    clock.advance(301)  # past max_age: asked again
    await cache.keys(A)
    assert len(fake.asked) == 2 and "refresh" not in fake.asked[1]


async def test_max_age_zero_asks_every_time(fake: Keys) -> None:
    fake.max_age = 0
    cache = _cache(fake, Clock())
    await cache.keys(A)
    await cache.keys(A)
    assert len(fake.asked) == 2


async def test_an_unknown_kid_refreshes_at_most_every_30_seconds_per_client(fake: Keys) -> None:
    """ADR 0004 §6: "refresh": true after an unknown kid, throttled per client."""
    clock = Clock()
    cache = _cache(fake, clock)
    await cache.keys(A)
    clock.advance(31)
    assert await cache.refresh_for_unknown_kid(A) is not None
    assert fake.asked[-1] == {"authorization": f"Bearer {CREDENTIAL}", "client_id": A, "refresh": True}
    assert await cache.refresh_for_unknown_kid(A) is None  # within 30 s: not asked
    assert len(fake.asked) == 2
    await cache.keys(B)  # another client has its own throttle
    assert await cache.refresh_for_unknown_kid(B) is None  # B was just asked
    clock.advance(30)
    assert await cache.refresh_for_unknown_kid(A) is not None
    assert len(fake.asked) == 4


async def test_the_cache_is_a_bounded_lru(fake: Keys) -> None:
    cache = _cache(fake, Clock(), max_clients=1)
    await cache.keys(A)
    await cache.keys(B)
    assert len(cache) == 1
    await cache.keys(A)  # A was dropped: asked again
    assert [a["client_id"] for a in fake.asked] == [A, B, A]


async def test_concurrent_requests_share_one_ask(fake: Keys) -> None:
    cache = _cache(fake, Clock())
    results = await asyncio.gather(*(cache.keys(A) for _ in range(5)))
    assert len(fake.asked) == 1 and all(r is results[0] for r in results)


async def test_a_refused_agent(fake: Keys) -> None:
    """ADR 0004 §6: 403 invalid_client is the agent refused, not the credential."""
    fake.status = 403
    with pytest.raises(AgentRefused):
        await _cache(fake, Clock()).keys(A)


async def test_a_refused_credential(fake: Keys) -> None:
    fake.status = 401
    with pytest.raises(AgentKeysRefused):
        await _cache(fake, Clock()).keys(A)


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_unavailable_keeps_retry_after(fake: Keys, status: int) -> None:
    fake.status = status
    with pytest.raises(AgentKeysUnavailable) as caught:
        await _cache(fake, Clock()).keys(A)
    assert caught.value.retry_after == "9"


@pytest.mark.parametrize("body", [b"not json", b'{"keys": "x"}', b'{"client_id": "https://other.example/c", "keys": []}'])
async def test_a_malformed_or_foreign_answer_fails_closed(fake: Keys, body: bytes) -> None:
    fake.body = body
    with pytest.raises(AgentKeysUnavailable):
        await _cache(fake, Clock()).keys(A)


async def test_private_members_are_never_trusted(fake: Keys) -> None:
    private = fake.keys[A].as_dict(private=True)
    fake.body = json.dumps({"client_id": A, "keys": [private], "max_age": 60}).encode()
    keys = await _cache(fake, Clock()).keys(A)
    assert list(keys.keys) == []


async def test_unreachable_is_unavailable() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("down", request=request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(down))
    with pytest.raises(AgentKeysUnavailable):
        await AgentKeysCache(URL, CREDENTIAL, http, Clock()).keys(A)


def test_the_credential_is_not_in_the_repr(fake: Keys) -> None:
    assert CREDENTIAL not in repr(_cache(fake, Clock()))
