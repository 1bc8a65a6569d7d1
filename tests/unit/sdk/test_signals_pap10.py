"""PAP 1.0 Session state from the Shared Signals stream (issue #13 §1, ADR 0005 §7).

The verifier with ``shared_signals=True`` against a fake Frontdoor: ``agent-keys`` and
``session-state`` as ADR 0004 §6 says (pap10_kit), and a scripted transmitter whose SETs
are signed by the issuer key the fake's JWKS publishes. Asserts what a resource server
sees (the caller or the refusal) and what Frontdoor was asked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal
from joserfc import jwt
from joserfc.jwk import ECKey

from .kit import API_URL, CREDENTIAL, ISSUER, Clock
from .pap10_kit import Agent10, Fake10

STREAM = "sst_pap10"
POLL = f"{ISSUER}/ssf/streams/{STREAM}/poll"
CAEP = "https://schemas.openid.net/secevent/caep/event-type/"
LIVE: dict[str, Any] = {"sets": {}, "position": 0, "lease": 5.0, "state": "live"}


@dataclass
class Transmitter:
    """The fake's endpoints plus a stream answering each poll from ``answers``."""

    fake: Fake10
    answers: list[dict[str, Any] | int] = field(default_factory=list)
    polls: list[dict[str, Any]] = field(default_factory=list)
    streams_created: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if url == f"{ISSUER}/ssf/streams":
            self.streams_created += 1
            return httpx.Response(201, json={"stream_id": STREAM, "aud": STREAM, "delivery": {
                "method": "urn:ietf:rfc:8936", "endpoint_url": POLL}})
        if url == POLL:
            self.polls.append(json.loads(request.content))
            while not self.answers:  # held, as Frontdoor holds a poll with nothing to deliver
                self.wake.clear()
                self.idle.set()
                await self.wake.wait()
            answer = self.answers.pop(0)
            if isinstance(answer, int):
                return httpx.Response(answer)
            return httpx.Response(200, json=answer)
        return self.fake.handle(request)

    async def deliver(self, *answers: dict[str, Any] | int) -> None:
        """Answer the held poll with ``answers`` (then hold again) and wait until they are applied."""
        self.idle.clear()
        self.answers = list(answers)
        self.wake.set()
        await asyncio.wait_for(self.idle.wait(), 5)

    def set(self, seq: int, event: str, subject: dict[str, Any], *, key: ECKey | None = None,
            jti: str | None = None, body: dict[str, Any] | None = None) -> tuple[str, str]:
        jti = jti or f"evt_{seq}"
        signer = key or self.fake.issuer_key
        token = jwt.encode({"alg": "ES256", "typ": "secevent+jwt", "kid": str(signer.kid)}, {
            "iss": ISSUER, "aud": STREAM, "jti": jti, "iat": self.fake.now, "seq": seq,
            "sub_id": {"format": "complex", **subject}, "events": {CAEP + event: body or {}}}, signer)
        return jti, token


def session_subject(caller: Caller) -> dict[str, Any]:
    return {"session": {"format": "opaque", "id": caller.frontdoor_session_id},
            "application": {"format": "uri", "uri": caller.client_id}}


@pytest.fixture
async def stream() -> AsyncIterator[tuple[FrontdoorVerifier, Transmitter]]:
    transmitter = Transmitter(Fake10(), answers=[dict(LIVE)])
    async with httpx.AsyncClient(transport=httpx.MockTransport(transmitter.handle)) as http:
        verifier = FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=Clock(), shared_signals=True)
        verifier.start()
        await asyncio.wait_for(transmitter.idle.wait(), 5)
        yield verifier, transmitter
        await verifier.aclose()


async def _verify(verifier: FrontdoorVerifier, agent: Agent10, token: str | None = None) -> Caller | Refusal:
    return await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, access_token=token))


async def _caller(verifier: FrontdoorVerifier, agent: Agent10, token: str | None = None) -> Caller:
    outcome = await _verify(verifier, agent, token)
    assert isinstance(outcome, Caller), outcome
    return outcome


def _refused(outcome: Caller | Refusal, status: int, error: str) -> None:
    assert isinstance(outcome, Refusal), outcome
    assert (outcome.status, outcome.error) == (status, error)


async def test_a_live_stream_answers_1_0_requests_from_memory(stream: tuple[FrontdoorVerifier, Transmitter]
                                                              ) -> None:
    verifier, t = stream
    agent = Agent10(t.fake)
    token = t.fake.access_token(agent, account="acct_9", scope="orders:read")
    first = await _caller(verifier, agent, token)
    second = await _caller(verifier, agent, token)  # a fresh Session JWT, the same Session and family
    assert len(t.fake.state_asks) == 1, "the second request is answered from memory"
    assert (second.signed_in, second.account, second.scopes) == (True, "acct_9", {"orders:read"})
    assert second.frontdoor_session_id == first.frontdoor_session_id
    await _caller(verifier, agent)  # signed out: another (client_id, sid, sgn), asked once
    await _caller(verifier, agent)
    assert len(t.fake.state_asks) == 2
    # Memory never answers a request naming another sub: Frontdoor does (mismatch).
    _refused(await verifier.verify("GET", API_URL, agent.headers("GET", API_URL, sub="someone-else")),
             400, "invalid_session")
    assert len(t.fake.state_asks) == 3


async def test_events_apply_in_order_and_are_acknowledged(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    """A family revoked (seq 1) and the Session ended (seq 2), sent in reverse order."""
    verifier, t = stream
    agent = Agent10(t.fake)
    token = t.fake.access_token(agent)
    caller = await _caller(verifier, agent, token)
    sgn = t.fake.state_asks[-1]["sgn"]
    revoked = t.set(1, "credential-change", {"application": {"format": "uri", "uri": agent.client_id},
                                             "user": {"format": "opaque", "id": sgn}},
                    body={"change_type": "revoke", "credential_type": "x-frontdoor-sign-in"})
    ended = t.set(2, "session-revoked", session_subject(caller), body={"initiating_entity": "admin"})
    t.fake.revoke(token)
    t.fake.sessions[(agent.client_id, agent.sid)].ended = True
    await t.deliver({**LIVE, "sets": dict([ended, revoked])})
    assert t.polls[-1]["ack"] == ["evt_1", "evt_2"]
    assert verifier.signals is not None and verifier.signals.position == 2
    _refused(await _verify(verifier, agent, token), 400, "session_ended")


async def test_a_revoked_family_is_asked_again_and_refused(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    verifier, t = stream
    agent = Agent10(t.fake)
    token = t.fake.access_token(agent)
    await _caller(verifier, agent, token)
    await _caller(verifier, agent)  # the Session signed out: held too
    sgn = t.fake.state_asks[0]["sgn"]
    t.fake.revoke(token)
    await t.deliver({**LIVE, "sets": dict([t.set(1, "credential-change", {
        "application": {"format": "uri", "uri": agent.client_id}, "user": {"format": "opaque", "id": sgn}})])})
    _refused(await _verify(verifier, agent, token), 401, "invalid_token")
    asks = len(t.fake.state_asks)
    await _caller(verifier, agent)  # only that family was dropped: the signed-out answer is still held
    assert len(t.fake.state_asks) == asks


async def test_a_missed_event_falls_back_to_session_state(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    """seq 2 arrives while 1 was never seen: nothing held is trusted, Frontdoor is asked."""
    verifier, t = stream
    agent = Agent10(t.fake)
    await _caller(verifier, agent)
    t.fake.sessions[(agent.client_id, agent.sid)].ended = True  # the missed event
    other = Agent10(t.fake)
    await t.deliver({**LIVE, "sets": dict([t.set(2, "session-revoked", {
        "application": {"format": "uri", "uri": other.client_id + "/x"}})])})
    assert verifier.signals is not None and verifier.signals.resyncs == 1 and t.polls[-1]["resync"] == 2
    _refused(await _verify(verifier, agent), 400, "session_ended")


async def test_a_stalled_receiver_marked_behind_falls_back(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    """The revoke did not get this receiver's acknowledgement: Frontdoor answers ``behind``."""
    verifier, t = stream
    agent = Agent10(t.fake)
    await _caller(verifier, agent)
    t.fake.sessions[(agent.client_id, agent.sid)].ended = True
    await t.deliver({"sets": {}, "position": 1, "state": "behind"})
    assert verifier.signals is not None and not verifier.signals.live
    _refused(await _verify(verifier, agent), 400, "session_ended")
    assert t.polls[-1]["resync"] == 1


async def test_a_revoke_during_a_reconnect(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    """The stream is gone (404) while a Session ends: the new stream starts with nothing held."""
    verifier, t = stream
    agent = Agent10(t.fake)
    await _caller(verifier, agent)
    t.fake.sessions[(agent.client_id, agent.sid)].ended = True
    await t.deliver(404, {**LIVE, "position": 1})
    assert t.streams_created == 2
    _refused(await _verify(verifier, agent), 400, "session_ended")


async def test_a_forged_set_is_never_applied_and_drops_memory(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    verifier, t = stream
    agent = Agent10(t.fake)
    await _caller(verifier, agent)
    forger = ECKey.generate_key("P-256", parameters={"kid": str(t.fake.issuer_key.kid)})
    forged = t.set(1, "token-claims-change", {"tenant": {"format": "opaque", "id": "x"}}, key=forger)
    await t.deliver({**LIVE, "sets": dict([forged])})
    assert t.polls[-1]["setErrs"]["evt_1"]["err"] == "invalid_key"
    assert verifier.signals is not None and not verifier.signals.live and verifier.signals.resyncs == 1
    asks = len(t.fake.state_asks)
    await _caller(verifier, agent)
    assert len(t.fake.state_asks) == asks + 1, "nothing held after a refused SET"


async def test_a_replayed_set_is_not_applied_twice(stream: tuple[FrontdoorVerifier, Transmitter]) -> None:
    verifier, t = stream
    agent = Agent10(t.fake)
    caller = await _caller(verifier, agent)
    ended = t.set(1, "token-claims-change", session_subject(caller), body={"claims": {"signed_in": False}})
    await t.deliver({**LIVE, "sets": dict([ended])})
    await _caller(verifier, agent)  # asked again after the event, and held again
    asks = len(t.fake.state_asks)
    await t.deliver({**LIVE, "position": 1, "sets": dict([ended])})  # the same SET once more
    assert t.polls[-1]["ack"] == ["evt_1"]
    await _caller(verifier, agent)
    assert len(t.fake.state_asks) == asks, "a replayed SET changes nothing"
