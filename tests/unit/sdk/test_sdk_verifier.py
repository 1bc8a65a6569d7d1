"""FrontdoorVerifier against a fake Frontdoor: the PAP §4.3 checks, then the Session's state.

Asserts what would go over the wire: status, WWW-Authenticate, body, and what was asked
of Frontdoor (introspection and JWKS calls).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator

import pytest
from frontdoor_sdk import Caller, FrontdoorVerifier, InMemoryReplayCache, Refusal, RotatingDPoPNonces
from joserfc.jwk import ECKey

from .kit import API_URL, CREDENTIAL, ISSUER, MCP_URL, Agent, Clock, FakeFrontdoor, SessionRecord

METADATA = "https://shop.example/.well-known/oauth-protected-resource/mcp"


@pytest.fixture
def frontdoor() -> FakeFrontdoor:
    return FakeFrontdoor()


@pytest.fixture
def fake_clock() -> Clock:
    return Clock()


@pytest.fixture
async def verifier(frontdoor: FakeFrontdoor, fake_clock: Clock) -> AsyncIterator[FrontdoorVerifier]:
    async with frontdoor.client() as http:
        yield FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)


def _refusal(outcome: Caller | Refusal, status: int, error: str) -> Refusal:
    assert isinstance(outcome, Refusal), outcome
    assert (outcome.status, outcome.error, outcome.body["error"]) == (status, error, error)
    assert outcome.headers["Cache-Control"] == "no-store"
    assert json.loads(outcome.content) == outcome.body
    return outcome


def _no_echo(refusal: Refusal, *secrets_: str) -> None:
    text = refusal.content.decode() + json.dumps(refusal.headers)
    for secret in secrets_:
        assert secret[-24:] not in text


async def test_a_signed_out_session_is_a_caller(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP §4.2-§4.3: a live signed-out Session reaches a route without scopes."""
    agent = Agent()
    token = frontdoor.mint(agent)
    caller = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))
    assert isinstance(caller, Caller)
    assert (caller.client_id, caller.user_id, caller.signed_in, caller.account) == (
        "https://agent.example/.well-known/client.json",
        agent.user_id,
        False,
        None,
    )
    assert caller.scopes == frozenset() and caller.token_type == "DPoP"
    assert frontdoor.introspections == [
        {"authorization": f"Bearer {CREDENTIAL}", "token": token, "token_type_hint": "access_token"}
    ]


async def test_signed_in_with_the_scope(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP §4.4: a signed-in Session with the route's scope gets through, with its account."""
    agent = Agent()
    token = frontdoor.mint(agent, signed_in=True, account="acct_42", scope="orders:read poppy:read")
    caller = await verifier.verify(
        "GET", API_URL, agent.headers("GET", API_URL, token), required_scopes=["orders:read"]
    )
    assert isinstance(caller, Caller)
    assert (caller.signed_in, caller.account, caller.scopes) == (True, "acct_42", {"orders:read", "poppy:read"})
    assert caller.has_scopes("orders:read") and not caller.has_scopes("orders:write")


async def test_signed_out_needs_sign_in(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP §4.3: a signed-out Session at a route with scopes: 403 sign_in_required naming them."""
    agent = Agent()
    token = frontdoor.mint(agent)
    outcome = await verifier.verify(
        "GET", API_URL, agent.headers("GET", API_URL, token), required_scopes=["orders:read"]
    )
    refusal = _refusal(outcome, 403, "sign_in_required")
    assert refusal.headers["WWW-Authenticate"] == (
        'DPoP error="sign_in_required", error_description="this request needs a signed-in Session",'
        ' scope="orders:read", algs="ES256"'
    )
    _no_echo(refusal, token)


async def test_missing_scope_is_insufficient_scope(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """RFC 6750 §3.1: signed in without the scope: 403 insufficient_scope with scope=."""
    agent = Agent()
    token = frontdoor.mint(agent, signed_in=True, account="acct_42", scope="poppy:read")
    outcome = await verifier.verify(
        "GET", API_URL, agent.headers("GET", API_URL, token), required_scopes=["orders:read", "poppy:read"]
    )
    refusal = _refusal(outcome, 403, "insufficient_scope")
    assert 'scope="orders:read poppy:read"' in refusal.headers["WWW-Authenticate"]
    assert refusal.body["scope"] == "orders:read poppy:read"


async def test_an_inactive_token_is_invalid_token(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP-4.9-01: Frontdoor says the Session ended: 401 invalid_token."""
    agent = Agent()
    token = frontdoor.mint(agent, active=False)
    refusal = _refusal(
        await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 401, "invalid_token"
    )
    assert refusal.headers["WWW-Authenticate"].startswith('DPoP error="invalid_token"')


async def test_sign_out_applies_to_the_very_next_request(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP-4.9-01: state is asked on every request by default."""
    agent = Agent()
    token = frontdoor.mint(agent, sid="ses_a", signed_in=True, account="acct_1", scope="orders:read")
    assert isinstance(
        await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token), required_scopes=["orders:read"]),
        Caller,
    )
    frontdoor.sessions["ses_a"] = SessionRecord(signed_in=False)
    outcome = await verifier.verify(
        "GET", API_URL, agent.headers("GET", API_URL, token), required_scopes=["orders:read"]
    )
    _refusal(outcome, 403, "sign_in_required")
    assert len(frontdoor.introspections) == 2


async def test_the_opt_in_state_cache_delays_sign_out_by_its_ttl(frontdoor: FakeFrontdoor, fake_clock: Clock) -> None:
    """PAP-4.9-02: with state_cache_ttl, an answer is reused for that long, then asked again."""
    agent = Agent()
    token = frontdoor.mint(agent, sid="ses_c", signed_in=True, account="acct_1", scope="orders:read")
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, state_cache_ttl=5)
        ask = lambda: verifier.verify(  # noqa: E731
            "GET", API_URL, agent.headers("GET", API_URL, token), required_scopes=["orders:read"]
        )
        assert isinstance(await ask(), Caller)
        frontdoor.sessions["ses_c"] = SessionRecord(signed_in=False)
        assert isinstance(await ask(), Caller)  # the trade-off: still signed in for up to 5 s
        assert len(frontdoor.introspections) == 1
        fake_clock.advance(6)
        # The proof's iat is fixed in these tests; six seconds stay inside its window.
        _refusal(await ask(), 403, "sign_in_required")
        assert len(frontdoor.introspections) == 2


@pytest.mark.parametrize("failure", ["503", "unreachable", "malformed", "not-json-object"])
async def test_introspection_down_fails_closed(
    verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor, failure: str
) -> None:
    """Fail closed: no state, no access: 503 temporarily_unavailable with Retry-After."""
    agent = Agent()
    token = frontdoor.mint(agent, signed_in=True, account="acct_1", scope="orders:read")
    await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))  # keys fetched while up
    if failure == "503":
        frontdoor.introspection_status = 503
    elif failure == "unreachable":
        frontdoor.unreachable = True
    elif failure == "malformed":
        frontdoor.introspection_body = b'{"active": "yes"}'
    else:
        frontdoor.introspection_body = b"[]"
    refusal = _refusal(
        await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 503, "temporarily_unavailable"
    )
    assert refusal.headers["Retry-After"] == ("7" if failure == "503" else "2")
    assert "WWW-Authenticate" not in refusal.headers


async def test_a_refused_credential_is_a_server_error(frontdoor: FakeFrontdoor, fake_clock: Clock) -> None:
    """A wrong resource-server credential is the company's configuration: 500, never allow."""
    agent = Agent()
    token = frontdoor.mint(agent)
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, "fdrs_wrong", http=http, clock=fake_clock)
        refusal = _refusal(
            await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 500, "server_error"
        )
    _no_echo(refusal, "fdrs_wrong")


async def test_an_answer_about_another_session_fails_closed(
    verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor
) -> None:
    """Introspection must describe the token's own Session (sid, sub, client_id, cnf)."""
    agent = Agent()
    token = frontdoor.mint(agent)
    frontdoor.answer_sid = "ses_someone_else"
    _refusal(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 401, "invalid_token")


async def test_crypto_failures_never_reach_introspection(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """The stateless checks come first: a bad proof costs no round trip."""
    agent = Agent()
    token = frontdoor.mint(agent)
    headers = [("Authorization", f"DPoP {token}"), ("DPoP", Agent().proof("GET", API_URL, token))]
    refusal = _refusal(await verifier.verify("GET", API_URL, headers), 401, "invalid_dpop_proof")
    assert refusal.headers["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"')
    assert frontdoor.introspections == []
    _no_echo(refusal, token, headers[1][1])


async def test_a_replayed_proof_is_refused(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """RFC 9449 §11.1 (security.dpop-replay): each proof is accepted once."""
    agent = Agent()
    token = frontdoor.mint(agent)
    headers = agent.headers("GET", API_URL, token)
    assert isinstance(await verifier.verify("GET", API_URL, headers), Caller)
    _refusal(await verifier.verify("GET", API_URL, headers), 401, "invalid_dpop_proof")


async def test_a_token_in_the_url_is_refused(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP-4.3-17: 400 invalid_request, the token not echoed."""
    agent = Agent()
    token = frontdoor.mint(agent)
    refusal = _refusal(
        await verifier.verify("GET", f"{API_URL}?access_token={token}", [("DPoP", agent.proof("GET", API_URL, token))]),
        400,
        "invalid_request",
    )
    assert refusal.headers["WWW-Authenticate"].startswith('DPoP error="invalid_request"')
    _no_echo(refusal, token)


async def test_no_credential_gets_a_bare_challenge(verifier: FrontdoorVerifier) -> None:
    """RFC 6750 §3.1: no error attribute in the challenge when no credential was sent."""
    refusal = _refusal(await verifier.verify("GET", API_URL, [("Cookie", "sid=1")]), 401, "invalid_token")
    assert refusal.headers["WWW-Authenticate"] == 'DPoP algs="ES256"'


async def test_a_dpop_token_as_bearer_is_invalid_token(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP-4.3-11 (security.dpop-token-as-bearer): 401 invalid_token, challenged with DPoP."""
    agent = Agent()
    token = frontdoor.mint(agent)
    headers = [("Authorization", f"Bearer {token}"), ("DPoP", agent.proof("GET", API_URL, token))]
    refusal = _refusal(await verifier.verify("GET", API_URL, headers), 401, "invalid_token")
    assert refusal.headers["WWW-Authenticate"].startswith("DPoP ")


async def test_mcp_bearer_token_and_challenges(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """PAP-4.3-10, PAP-6-06: a Bearer token at its MCP server; refusals name the metadata per scheme."""
    agent = Agent()
    token = frontdoor.mint(agent, resource=MCP_URL, bound=False)
    caller = await verifier.verify("POST", MCP_URL, [("Authorization", f"Bearer {token}")], resource_url=MCP_URL)
    assert isinstance(caller, Caller) and caller.token_type == "Bearer"
    bare = _refusal(await verifier.verify("POST", MCP_URL, [], resource_url=MCP_URL), 401, "invalid_token")
    assert bare.headers["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{METADATA}", DPoP algs="ES256", resource_metadata="{METADATA}"'
    )
    bearer_only = await verifier.verify("POST", MCP_URL, [], resource_url=MCP_URL, mcp_dpop=False)
    assert isinstance(bearer_only, Refusal)
    assert bearer_only.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{METADATA}"'
    scoped = await verifier.verify(
        "POST", MCP_URL, [("Authorization", f"Bearer {token}")], resource_url=MCP_URL, required_scopes=["orders:read"]
    )
    challenge = _refusal(scoped, 403, "sign_in_required").headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer error="sign_in_required"') and challenge.count('scope="orders:read"') == 2
    # An ordinary Session Token is refused there (PAP-6-05), and the MCP token at the API.
    ordinary = frontdoor.mint(agent)
    outcome = await verifier.verify("POST", MCP_URL, agent.headers("POST", MCP_URL, ordinary), resource_url=MCP_URL)
    _refusal(outcome, 401, "invalid_token")
    _refusal(await verifier.verify("GET", API_URL, [("Authorization", f"Bearer {token}")]), 401, "invalid_token")


async def test_unknown_kid_refetches_the_jwks_at_most_every_30_seconds(
    verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor, fake_clock: Clock
) -> None:
    """GUIDE-keys-02: a rotated key is picked up; a flood of unknown kids is not refetched each time."""
    agent = Agent()
    assert isinstance(
        await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, frontdoor.mint(agent))), Caller
    )
    assert frontdoor.jwks_calls == 1
    fake_clock.advance(31)
    rotated = ECKey.generate_key("P-256", parameters={"kid": "k2"})
    frontdoor.keys.append(rotated)
    token = frontdoor.mint(agent, key=rotated)
    # Proofs carry iat = NOW: the clock stays within their 60 s window throughout.
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), Caller)
    assert frontdoor.jwks_calls == 2
    forged = frontdoor.mint(agent, key=ECKey.generate_key("P-256", parameters={"kid": f"k{secrets.token_hex(4)}"}))
    for _ in range(3):
        _refusal(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, forged)), 401, "invalid_token")
    assert frontdoor.jwks_calls == 2
    fake_clock.advance(20)  # 51 s after the first fetch, 20 s after the refetch: still throttled
    _refusal(
        await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, forged, iat=1_780_000_050)),
        401,
        "invalid_token",
    )
    assert frontdoor.jwks_calls == 2
    assert frontdoor.introspections and all(i["token"] != forged for i in frontdoor.introspections)


async def test_jwks_unavailable_fails_closed(frontdoor: FakeFrontdoor, fake_clock: Clock) -> None:
    """No keys, no verification: 503, never an unchecked token."""
    frontdoor.jwks_status = 500
    agent = Agent()
    token = frontdoor.mint(agent)
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)
        _refusal(
            await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 503, "temporarily_unavailable"
        )
        _refusal(
            await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 503, "temporarily_unavailable"
        )
        assert frontdoor.jwks_calls == 1  # not retried within a second
        frontdoor.jwks_status = 200
        fake_clock.advance(2)
        outcome = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))
        assert isinstance(outcome, Caller)


@pytest.mark.parametrize("down", ["unreachable", "500"])
async def test_no_credential_is_challenged_while_the_jwks_is_unavailable(
    frontdoor: FakeFrontdoor, fake_clock: Clock, down: str
) -> None:
    """RFC 6750 §3.1, RFC 9449 §7.1: the 401 challenge needs no key, so it does not wait for the issuer;
    a real token is still 503 (fail closed), and a second Authorization header still 400."""
    frontdoor.unreachable = down == "unreachable"
    frontdoor.jwks_status = 500
    agent = Agent()
    token = frontdoor.mint(agent)
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)
        for headers in ([], [("Cookie", "sid=1")], [("Authorization", "Basic dXNlcjpwYXNz")]):
            refusal = _refusal(await verifier.verify("GET", API_URL, headers), 401, "invalid_token")
            assert refusal.headers["WWW-Authenticate"] == 'DPoP algs="ES256"'
        _refusal(
            await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 503, "temporarily_unavailable"
        )
        twice = [("Authorization", f"DPoP {token}"), ("Authorization", f"DPoP {token}")]
        _refusal(await verifier.verify("GET", API_URL, twice), 400, "invalid_request")
    assert frontdoor.introspections == []


async def test_dpop_nonces_when_configured(frontdoor: FakeFrontdoor, fake_clock: Clock) -> None:
    """PAP-4.3-21, RFC 9449 §9: without the nonce, use_dpop_nonce with DPoP-Nonce; with it, accepted."""
    nonces = RotatingDPoPNonces(secrets.token_bytes(32), clock=fake_clock)
    agent = Agent()
    token = frontdoor.mint(agent)
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, dpop_nonces=nonces)
        refusal = _refusal(
            await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token)), 401, "use_dpop_nonce"
        )
        nonce = refusal.headers["DPoP-Nonce"]
        assert nonce == nonces.current()
        retried = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token, nonce=nonce))
        assert isinstance(retried, Caller)


async def test_a_shared_replay_cache_is_pluggable(frontdoor: FakeFrontdoor, fake_clock: Clock) -> None:
    """Two verifiers (two replicas) sharing one replay cache refuse a proof replayed across them."""
    shared = InMemoryReplayCache(clock=fake_clock)
    agent = Agent()
    token = frontdoor.mint(agent)
    headers = agent.headers("GET", API_URL, token)
    async with frontdoor.client() as http:
        first = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, replay_cache=shared)
        second = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, replay_cache=shared)
        assert isinstance(await first.verify("GET", API_URL, headers), Caller)
        _refusal(await second.verify("GET", API_URL, headers), 401, "invalid_dpop_proof")


async def test_the_verifier_owns_and_closes_its_client(frontdoor: FakeFrontdoor) -> None:
    """Without an injected client the verifier makes one and closes it; an injected one is left open."""
    async with frontdoor.client() as http:
        async with FrontdoorVerifier(ISSUER, CREDENTIAL, http=http) as verifier:
            assert "fdrs" not in repr(verifier)
        assert not http.is_closed
    own = FrontdoorVerifier(ISSUER, CREDENTIAL)
    await own.aclose()
    with pytest.raises(ValueError, match="issuer"):
        FrontdoorVerifier("http://auth.example/shop-a", CREDENTIAL)
    with pytest.raises(ValueError, match="credential"):
        FrontdoorVerifier(ISSUER, "")
