"""FrontdoorVerifier's 1.0 way (ADR 0004 §3, §6, §7) against a fake Frontdoor.

Requests are signed with the protocol library's agent-side helpers; asserts what would go
over the wire: status, error, WWW-Authenticate, and what Frontdoor was asked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal

from .kit import API_URL, CREDENTIAL, ISSUER, MCP_URL, NOW, Agent, Clock, FakeFrontdoor
from .pap10_kit import Agent10, Fake10

METADATA = "https://shop.example/.well-known/oauth-protected-resource"


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


def _refused(outcome: Caller | Refusal, status: int, error: str) -> Refusal:
    assert isinstance(outcome, Refusal), outcome
    assert (outcome.status, outcome.error, outcome.body["error"]) == (status, error, error)
    assert outcome.headers["Cache-Control"] == "no-store"
    return outcome


def _no_echo(refusal: Refusal, *values: str) -> None:
    text = refusal.content.decode() + json.dumps(refusal.headers)
    for value in values:
        assert value[-20:] not in text


async def test_signed_out_is_a_1_0_caller(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """ADR 0004 §3, §6: a valid Session JWT, keys from agent-keys, state from session-state."""
    agent = Agent10(fake, agent_id="phone-1")
    caller = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL))
    assert isinstance(caller, Caller), caller
    assert (caller.profile, caller.client_id, caller.user_id, caller.session_id, caller.agent_id) == (
        "1.0", agent.client_id, agent.sub, agent.sid, "phone-1")
    assert (caller.signed_in, caller.account, caller.scopes, caller.token_type) == (False, None, frozenset(), None)
    assert caller.frontdoor_session_id is not None and caller.frontdoor_session_id.startswith("ses_")
    assert fake.key_asks == [{"client_id": agent.client_id}]
    ask = fake.state_asks[0]
    assert {k: ask[k] for k in ("client_id", "sid", "sub", "agent_id", "iat")} == {
        "client_id": agent.client_id, "sid": agent.sid, "sub": agent.sub, "agent_id": "phone-1", "iat": NOW}
    assert "sgn" not in ask and fake.jwks_calls == 0  # signed out: the issuer's keys are not needed


async def test_signed_in_with_an_access_token(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """ADR 0004 §4: account and scopes come from the access token; sgn is sent to session-state."""
    agent = Agent10(fake)
    token = fake.access_token(agent, account="acct_7", scope="orders:read poppy:read")
    caller = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token),
                                   required_scopes=["orders:read"])
    assert isinstance(caller, Caller), caller
    assert (caller.signed_in, caller.account, caller.scopes, caller.token_type) == (
        True, "acct_7", {"orders:read", "poppy:read"}, "Bearer")
    assert fake.state_asks[0]["sgn"].startswith("sgn_")


async def test_a_dpop_bound_access_token(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    agent = Agent10(fake)
    dpop = Agent()
    token = fake.access_token(agent, dpop=dpop)
    caller = await verifier.verify(
        "GET", API_URL, agent.headers("GET", API_URL, access_token=token, scheme="DPoP", dpop=dpop))
    assert isinstance(caller, Caller) and caller.token_type == "DPoP", caller
    unproved = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token,
                                                                   scheme="DPoP"))
    refusal = _refused(unproved, 401, "invalid_dpop_proof")
    assert refusal.headers["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"')


async def test_signed_out_at_a_scoped_route_gets_the_sign_in_challenge(
    verifier: FrontdoorVerifier, fake: Fake10
) -> None:
    """ADR 0004 §7 [Q4]: 401 Bearer scope=, resource_metadata= derived from the request origin."""
    agent = Agent10(fake)
    refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL),
                                             required_scopes=["orders:read"]), 401, "sign_in_required")
    assert refusal.headers["WWW-Authenticate"] == f'Bearer scope="orders:read", resource_metadata="{METADATA}"'


async def test_the_configured_metadata_url_is_used(fake: Fake10, fake_clock: Clock) -> None:
    configured = "https://www.shop.example/.well-known/oauth-protected-resource"
    async with fake.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, resource_metadata_url=configured)
        agent = Agent10(fake)
        refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL),
                                                 required_scopes=["orders:read"]), 401, "sign_in_required")
    assert f'resource_metadata="{configured}"' in refusal.headers["WWW-Authenticate"]


async def test_insufficient_scope(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    agent = Agent10(fake)
    token = fake.access_token(agent, scope="poppy:read")
    refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token),
                                             required_scopes=["orders:read"]), 403, "insufficient_scope")
    assert refusal.headers["WWW-Authenticate"].startswith('Bearer error="insufficient_scope"')
    assert 'scope="orders:read"' in refusal.headers["WWW-Authenticate"]


async def test_a_replay_is_refused_locally_without_a_round_trip(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """ADR 0004 §3 [Q12]: the sdk's ReplayCache refuses the same jti first."""
    agent = Agent10(fake)
    headers = agent.headers("GET", API_URL)
    assert isinstance(await verifier.verify("GET", API_URL, headers), Caller)
    refusal = _refused(await verifier.verify("GET", API_URL, headers), 400, "invalid_session")
    assert "WWW-Authenticate" not in refusal.headers
    assert len(fake.state_asks) == 1
    _no_echo(refusal, headers[0][1])


async def test_a_replay_to_another_replica_is_refused_by_frontdoor(fake: Fake10, fake_clock: Clock) -> None:
    """Two verifiers with their own caches: session-state's jti claim catches the replay."""
    agent = Agent10(fake)
    headers = agent.headers("GET", API_URL)
    async with fake.client() as http:
        one = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)
        two = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)
        assert isinstance(await one.verify("GET", API_URL, headers), Caller)
        _refused(await two.verify("GET", API_URL, headers), 400, "invalid_session")


async def test_an_ended_session(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """ADR 0004 §5, §7: 400 session_ended, no challenge."""
    agent = Agent10(fake)
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
    fake.sessions[(agent.client_id, agent.sid)].ended = True
    refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), 400, "session_ended")
    assert "WWW-Authenticate" not in refusal.headers


async def test_a_changed_sub_is_invalid_session(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    agent = Agent10(fake)
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, sub="someone-else")),
             400, "invalid_session")


async def test_a_revoked_sign_in_is_invalid_token_and_the_session_goes_on(
    verifier: FrontdoorVerifier, fake: Fake10
) -> None:
    """ADR 0004 §5: the grant family revoked: 401 invalid_token; signed out still works."""
    agent = Agent10(fake)
    token = fake.access_token(agent)
    fake.revoke(token)
    refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token)),
                       401, "invalid_token")
    assert refusal.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
    _no_echo(refusal, token)
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)


async def test_another_clients_token_is_invalid_token(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """[S §3]: the access token's client_id must be the Session's iss."""
    agent = Agent10(fake)
    other = Agent10(fake, client_id="https://other.example/client.json")
    token = fake.access_token(other)
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token)),
             401, "invalid_token")


async def test_a_token_of_another_issuer_key_is_invalid_token(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    from joserfc.jwk import ECKey

    agent = Agent10(fake)
    forged = fake.access_token(agent, key=ECKey.generate_key("P-256", parameters={"kid": "i1"}))
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=forged)),
             401, "invalid_token")


async def test_wrong_audience_or_url_is_invalid_session(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """ADR 0004 §2, §3: aud is the issuer exactly; htu is the request URL."""
    agent = Agent10(fake)
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, audience=ISSUER + "/")),
             400, "invalid_session")
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", "https://shop.example/api/other")),
             400, "invalid_session")
    _refused(await verifier.verify("POST", API_URL, agent.headers("GET", API_URL)), 400, "invalid_session")


async def test_a_stale_session_jwt_is_invalid_session(verifier: FrontdoorVerifier, fake: Fake10,
                                                      fake_clock: Clock) -> None:
    agent = Agent10(fake)
    headers = agent.headers("GET", API_URL)
    fake_clock.advance(120)
    _refused(await verifier.verify("GET", API_URL, headers), 400, "invalid_session")
    assert fake.state_asks == []


async def test_an_unknown_delegation_kid_reloads_once_then_is_refused(
    verifier: FrontdoorVerifier, fake: Fake10, fake_clock: Clock
) -> None:
    """ADR 0004 §6: one "refresh": true, at most every 30 s per client."""
    from joserfc.jwk import ECKey

    agent = Agent10(fake)
    assert isinstance(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
    # The agent rotated to an identity key (kid id2) Frontdoor has not seen yet.
    fresh = Agent10(fake, sid="s-new", publish=False,
                    identity_key=ECKey.generate_key("P-256", parameters={"kid": "id2"}))

    def now() -> int:
        return int(fake_clock.now.timestamp())

    fake_clock.advance(31)
    refused = await verifier.verify("GET", API_URL, fresh.headers("GET", API_URL, iat=now()))
    _refused(refused, 400, "invalid_session")
    assert fake.key_asks[-1] == {"client_id": agent.client_id, "refresh": True}
    asks = len(fake.key_asks)
    fake.identity[agent.client_id].append(fresh.identity_key)  # now published, but within 30 s
    _refused(await verifier.verify("GET", API_URL, fresh.headers("GET", API_URL, iat=now())),
             400, "invalid_session")
    assert len(fake.key_asks) == asks
    fake_clock.advance(31)
    assert isinstance(await verifier.verify("GET", API_URL, fresh.headers("GET", API_URL, iat=now())), Caller)


async def test_a_refused_agent_is_invalid_session(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    agent = Agent10(fake)
    fake.refused_clients.add(agent.client_id)
    refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)), 400, "invalid_session")
    assert "WWW-Authenticate" not in refusal.headers


@pytest.mark.parametrize("which", ["keys", "state"])
async def test_unavailable_is_503_with_retry_after(verifier: FrontdoorVerifier, fake: Fake10, which: str) -> None:
    """ADR 0004 §7 [Q3]: fail closed, with Frontdoor's Retry-After."""
    agent = Agent10(fake)
    if which == "keys":
        fake.keys_status = 503
    else:
        fake.state_status = 503
    refusal = _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL)),
                       503, "temporarily_unavailable")
    assert refusal.headers["Retry-After"] == ("11" if which == "keys" else "13")


async def test_two_session_headers_are_invalid_session(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    agent = Agent10(fake)
    headers = agent.headers("GET", API_URL) + agent.headers("GET", API_URL)
    _refused(await verifier.verify("GET", API_URL, headers), 400, "invalid_session")
    assert fake.key_asks == []


async def test_a_0_2_request_still_goes_the_0_2_way(fake_clock: Clock) -> None:
    """The same verifier, the same route: a Session Token request is verified as before."""
    frontdoor = FakeFrontdoor()
    agent = Agent()
    token = frontdoor.mint(agent)
    async with frontdoor.client() as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock)
        caller = await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, token))
        assert isinstance(caller, Caller) and caller.profile == "0.2" and caller.agent_id is None
        bare = await verifier.verify("GET", API_URL, [])
        assert isinstance(bare, Refusal) and (bare.status, bare.headers["WWW-Authenticate"]) == (401, 'DPoP algs="ES256"')


async def test_profiles_turn_either_way_off(fake: Fake10, fake_clock: Clock) -> None:
    """profiles=("0.2",): a Poppy-Session is ignored (0.2 challenge); ("1.0",): no header is invalid_session."""
    agent = Agent10(fake)
    async with fake.client() as http:
        only_02 = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, profiles=("0.2",))
        outcome = await only_02.verify("GET", API_URL, agent.headers("GET", API_URL))
        assert isinstance(outcome, Refusal) and outcome.status == 401
        assert outcome.headers["WWW-Authenticate"] == 'DPoP algs="ES256"'
        assert fake.key_asks == []
        only_10 = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=fake_clock, profiles=("1.0",))
        _refused(await only_10.verify("GET", API_URL, []), 400, "invalid_session")
        assert isinstance(await only_10.verify("GET", API_URL, agent.headers("GET", API_URL)), Caller)
        assert only_10.profiles == {"1.0"}
    with pytest.raises(ValueError):
        FrontdoorVerifier(ISSUER, CREDENTIAL, profiles=("0.3",))
    with pytest.raises(ValueError):
        FrontdoorVerifier(ISSUER, CREDENTIAL, profiles=())


async def test_at_the_mcp_server_a_token_for_it_is_accepted(verifier: FrontdoorVerifier, fake: Fake10) -> None:
    """RFC 8707 / ADR 0004 §4: a token for the MCP url is accepted there, not at the API."""
    agent = Agent10(fake)
    token = fake.access_token(agent, audience=MCP_URL)
    caller = await verifier.verify("POST", MCP_URL, agent.headers("POST", MCP_URL, access_token=token),
                                   resource_url=MCP_URL)
    assert isinstance(caller, Caller) and caller.signed_in, caller
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token)),
             401, "invalid_token")
    signed_out = await verifier.verify("POST", MCP_URL, agent.headers("POST", MCP_URL),
                                       required_scopes=["orders:read"], resource_url=MCP_URL)
    refusal = _refused(signed_out, 401, "sign_in_required")
    assert 'resource_metadata="https://shop.example/.well-known/oauth-protected-resource/mcp"' in (
        refusal.headers["WWW-Authenticate"])
