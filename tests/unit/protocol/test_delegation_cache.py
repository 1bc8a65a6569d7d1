"""The verified-delegation cache (ADR 0004 §3 step 4) and the bounded LRU it shares with DPoP keys.

A delegation that verified is remembered by its exact compact string and the identity key
that verified it; every check that depends on the request or the time (``kid`` among the
current identity keys, ``iss`` = the Session JWT's ``iss``, expiry, ``iat``, and all of the
Session JWT's own checks) still runs on each request. Each test shows a hit or a miss by
counting the delegation signature checks actually made.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from frontdoor_protocol import (
    BoundedLRU,
    DelegationCache,
    ErrorCode,
    ProtocolError,
    UnknownAgentKeyId,
    parse_poppy_session,
    verify_poppy_session,
)
from frontdoor_protocol import delegation as delegation_module
from frontdoor_protocol.delegated_session import DelegatedSession
from joserfc.jwk import KeySet

from .jose_helpers import ISSUER, NOW, ec_key, public, public_set
from .pap10_helpers import METHOD, URL, Agent


class SignatureCount:
    def __init__(self) -> None:
        self.calls = 0


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[SignatureCount]:
    """Counts the delegation signature checks (the work a hit skips)."""
    count = SignatureCount()
    real = delegation_module.signature_verifies

    def counting(jws: object, key: object) -> bool:
        count.calls += 1
        return real(jws, key)  # type: ignore[arg-type]

    monkeypatch.setattr(delegation_module, "signature_verifies", counting)
    yield count


def verify(
    value: str,
    cache: DelegationCache,
    *,
    keys: KeySet,
    now: int = NOW,
) -> DelegatedSession:
    return verify_poppy_session(
        parse_poppy_session(value, delegations=cache),
        identity_keys=keys,
        audience=ISSUER,
        method=METHOD,
        url=URL,
        now=now,
        access_token=None,
        delegations=cache,
    )


def refused(action: object, description: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        action()  # type: ignore[operator]
    assert caught.value.code is ErrorCode.INVALID_SESSION
    assert caught.value.description == description


def test_a_second_request_with_the_same_delegation_skips_its_signature(checks: SignatureCount) -> None:
    """ADR 0004 §3 step 4: the same delegation on a new Session JWT is not verified again, the JWT is."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    first = verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    assert checks.calls == 1 and len(cache) == 1 and delegation in cache
    second = verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    assert checks.calls == 1
    assert (second.delegated_jkt, second.delegation_jti, second.delegation_exp) == (
        first.delegated_jkt, first.delegation_jti, first.delegation_exp)
    assert second.jti != first.jti
    # The parse is reused too: the SessionHeader carries the remembered parse.
    assert parse_poppy_session(agent.session(delegation=delegation), delegations=cache).delegation is \
        cache.parsed(delegation)


def test_a_cached_delegation_is_refused_once_expired(checks: SignatureCount) -> None:
    """ADR 0004 §3 step 4: expiry is checked against now on every request, cached or not."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation(iat=NOW - 10, exp=NOW + 100)
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    later = NOW + 100 + 60  # past exp and the 60 s skew
    value = agent.session(delegation=delegation, iat=later)
    refused(lambda: verify(value, cache, keys=agent.keys, now=later), "the delegation has expired")
    assert checks.calls == 1  # refused from the cache entry, not by verifying again
    # Just inside the skew it is still accepted from the cache.
    verify(agent.session(delegation=delegation, iat=later - 1), cache, keys=agent.keys, now=later - 1)


def test_a_rotated_identity_key_with_the_same_kid_misses(checks: SignatureCount) -> None:
    """ADR 0004 §3 step 4: a key replaced in the agent's JWKS (same kid) misses and fails the signature."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    rotated = public_set(ec_key(agent.identity.kid))
    value = agent.session(delegation=delegation)
    refused(lambda: verify(value, cache, keys=rotated), "the delegation signature is invalid")
    assert checks.calls == 2


def test_a_removed_identity_key_is_unknown_even_when_cached(checks: SignatureCount) -> None:
    """ADR 0004 §3 step 4: a kid no longer in the JWKS is UnknownAgentKeyId, cached or not."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    value = agent.session(delegation=delegation)
    with pytest.raises(UnknownAgentKeyId):
        verify(value, cache, keys=public_set(ec_key("another-kid")))
    assert checks.calls == 1


def test_the_same_key_reimported_still_hits(checks: SignatureCount) -> None:
    """A JWKS loaded again (new key objects, same key) keeps the entry: it is keyed by the key, not the object."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    reloaded = KeySet([public(agent.identity)])
    verify(agent.session(delegation=delegation), cache, keys=reloaded)
    verify(agent.session(delegation=delegation), cache, keys=reloaded)
    assert checks.calls == 1


def test_a_tampered_delegation_misses(checks: SignatureCount) -> None:
    """A delegation differing in one character is another key: verified in full, refused, not stored."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    head, payload, signature = delegation.split(".")
    flipped = "A" if signature[5] != "A" else "B"
    tampered = f"{head}.{payload}.{signature[:5]}{flipped}{signature[6:]}"
    value = agent.session(delegation=tampered)
    refused(lambda: verify(value, cache, keys=agent.keys), "the delegation signature is invalid")
    assert checks.calls == 2 and len(cache) == 1 and tampered not in cache


def test_a_cached_delegation_used_by_another_client_is_refused() -> None:
    """ADR 0004 §3 step 4: the delegation's iss must be the Session JWT's iss on every request."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    value = agent.session(delegation=delegation, iss="https://other-agent.example/client.json")
    refused(lambda: verify(value, cache, keys=agent.keys), "the delegation iss is not the client")


def test_the_session_jwt_is_still_checked_against_the_cached_delegated_key() -> None:
    """ADR 0004 §3 step 5: a Session JWT signed by another key fails even when its delegation is cached."""
    agent, cache = Agent(), DelegationCache()
    delegation = agent.delegation()
    verify(agent.session(delegation=delegation), cache, keys=agent.keys)
    forged = agent.session(delegation=delegation, signer=ec_key(None))
    refused(lambda: verify(forged, cache, keys=agent.keys), "the Session JWT signature is invalid")
    wrong_kid = agent.session(delegation=delegation, header={"kid": "x" * 43})
    refused(lambda: verify(wrong_kid, cache, keys=agent.keys),
            "the Session JWT kid is not the delegated key thumbprint")


def test_a_refused_delegation_is_not_stored() -> None:
    agent, cache = Agent(), DelegationCache()
    expired = agent.delegation(iat=NOW - 7200, exp=NOW - 61)
    value = agent.session(delegation=expired)
    refused(lambda: verify(value, cache, keys=agent.keys), "the delegation has expired")
    assert len(cache) == 0


def test_the_bound_holds_least_recently_used_first(checks: SignatureCount) -> None:
    """Past maxsize the least recently used delegation is dropped (LRU, not cleared)."""
    agent, cache = Agent(), DelegationCache(maxsize=2)
    one, two, three = agent.delegation(), agent.delegation(), agent.delegation()
    verify(agent.session(delegation=one), cache, keys=agent.keys)
    verify(agent.session(delegation=two), cache, keys=agent.keys)
    verify(agent.session(delegation=one), cache, keys=agent.keys)  # one is now the most recent
    assert checks.calls == 2
    verify(agent.session(delegation=three), cache, keys=agent.keys)
    assert len(cache) == 2 and one in cache and three in cache and two not in cache
    verify(agent.session(delegation=two), cache, keys=agent.keys)  # verified again
    assert checks.calls == 4 and one not in cache


def test_without_a_cache_every_delegation_is_verified(checks: SignatureCount) -> None:
    agent = Agent()
    delegation = agent.delegation()
    for _ in range(2):
        agent.verify(agent.session(delegation=delegation))
    assert checks.calls == 2


def test_bounded_lru() -> None:
    lru: BoundedLRU[str, int] = BoundedLRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1
    lru.put("c", 3)
    assert ("a" in lru, "b" in lru, "c" in lru, len(lru)) == (True, False, True, 2)
    lru.put("a", 4)
    assert lru.get("a") == 4 and lru.get("b") is None
    lru.pop("a")
    assert len(lru) == 1 and lru.maxsize == 2
    with pytest.raises(ValueError):
        BoundedLRU(0)
    with pytest.raises(ValueError):
        DelegationCache(maxsize=0)


def test_the_dpop_key_cache_is_the_same_bounded_lru() -> None:
    """DPoP's imported-key cache (the carried-JWK import) is a BoundedLRU too (evicts the oldest)."""
    from frontdoor_protocol import public_jwk

    assert isinstance(public_jwk._KEY_CACHE, BoundedLRU)
    assert public_jwk._KEY_CACHE.maxsize == 4096
