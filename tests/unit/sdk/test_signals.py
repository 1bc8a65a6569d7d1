"""The Shared Signals receiver's rules (ADR 0005), against a scripted transmitter.

Frontdoor is an ``httpx.MockTransport`` that answers each poll from a script; the SETs are
signed here with a key the JWKS publishes. The wire behaviour at the real issuer is in
tests/integration/signin/test_shared_signals.py.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx
from frontdoor_sdk.introspection import SessionState
from frontdoor_sdk.jwks_cache import JwksCache
from frontdoor_sdk.signals import SessionSignals
from joserfc import jwt
from joserfc.jwk import ECKey

ISSUER = "https://auth.example/shop"
STREAM = "sst_test"
KEY = ECKey.generate_key("P-256", parameters={"kid": "k1"})
CAEP = "https://schemas.openid.net/secevent/caep/event-type/"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _set(seq: int, event: str, body: dict[str, Any], sid: str = "ses_a") -> tuple[str, str]:
    jti = f"evt_{seq}"
    token = jwt.encode({"alg": "ES256", "typ": "secevent+jwt", "kid": "k1"}, {
        "iss": ISSUER, "aud": STREAM, "jti": jti, "iat": int(NOW.timestamp()), "seq": seq,
        "sub_id": {"format": "complex", "session": {"format": "opaque", "id": sid},
                   "application": {"format": "uri", "uri": "https://agent.example"}},
        "events": {CAEP + event: body}}, KEY)
    return jti, token


class Script:
    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self.idle = asyncio.Event()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if url == f"{ISSUER}/jwks.json":
            return httpx.Response(200, json={"keys": [{**KEY.as_dict(private=False), "kid": "k1"}]})
        if url == f"{ISSUER}/ssf/streams":
            return httpx.Response(201, json={"stream_id": STREAM, "aud": STREAM, "delivery": {
                "method": "urn:ietf:rfc:8936", "endpoint_url": f"{ISSUER}/ssf/streams/{STREAM}/poll"}})
        self.requests.append(json.loads(request.content))
        if not self.answers:
            self.idle.set()
            await asyncio.sleep(3600)
        return httpx.Response(200, json=self.answers.pop(0))


async def _run(answers: list[dict[str, Any]]) -> tuple[SessionSignals, Script]:
    script = Script(answers)
    http = httpx.AsyncClient(transport=httpx.MockTransport(script.handle))
    clock = lambda: NOW  # noqa: E731
    signals = SessionSignals(ISSUER, "fdrs_x", http, JwksCache(f"{ISSUER}/jwks.json", http, clock), clock)
    signals.start()
    await asyncio.wait_for(script.idle.wait(), 5)
    return signals, script


def _held(signals: SessionSignals) -> None:
    signals.remember("ses_a", SessionState(active=True, client_id="https://agent.example", sub="u1", signed_in=True,
                                           account="acct-1", scope="a b"), signals.mark())


async def test_events_in_one_answer_apply_in_seq_order_and_are_acknowledged() -> None:
    """A narrowing (seq 1) and a sign-out (seq 2) sent in reverse order: the sign-out wins."""
    narrowed = _set(1, "token-claims-change", {"claims": {"signed_in": True, "account": "acct-1", "scope": "a"}})
    signed_out = _set(2, "token-claims-change", {"claims": {"signed_in": False}})
    signals, script = await _run([{"sets": {}, "position": 0, "lease": 5.0, "state": "live"}])
    _held(signals)
    assert signals.live and signals.lookup("ses_a") is not None
    script.idle.clear()
    script.answers = [{"sets": dict([signed_out, narrowed]), "position": 0, "lease": 5.0, "state": "live"}]
    script.requests.clear()
    await signals.aclose()
    signals.start()
    await asyncio.wait_for(script.idle.wait(), 5)
    held = signals.lookup("ses_a")
    assert held is not None and (held.signed_in, held.account, held.scope) == (False, None, None)
    assert signals.position == 2
    assert script.requests[-1]["ack"] == ["evt_1", "evt_2"]
    await signals.aclose()


async def test_a_gap_drops_memory_and_resyncs() -> None:
    """seq 3 after 1: seq 2 is missing, so nothing held is trusted; the next poll says resync."""
    signals, script = await _run([{"sets": {}, "position": 1, "lease": 5.0, "state": "live"}])
    _held(signals)
    script.idle.clear()
    script.answers = [{"sets": dict([_set(3, "session-revoked", {}, sid="ses_other")]), "position": 1,
                       "lease": 5.0, "state": "live"}]
    await signals.aclose()
    signals.start()
    await asyncio.wait_for(script.idle.wait(), 5)
    assert signals.resyncs == 1 and signals.lookup("ses_a") is None and not signals.live
    assert script.requests[-1]["resync"] == 3
    await signals.aclose()


async def test_behind_drops_memory_and_no_lease_until_resync() -> None:
    signals, script = await _run([{"sets": {}, "position": 0, "lease": 5.0, "state": "live"},
                                  {"sets": {}, "position": 7, "state": "behind"}])
    assert signals.lookup("ses_a") is None and not signals.live and signals.resyncs == 1
    assert script.requests[-1]["resync"] == 7
    await signals.aclose()


async def test_an_answer_asked_across_an_event_is_not_kept() -> None:
    signals, _ = await _run([{"sets": {}, "position": 0, "lease": 5.0, "state": "live"}])
    mark = signals.mark()
    signals._apply({"events": {CAEP + "session-revoked": {}}, "sub_id": {"format": "complex",
                    "application": {"format": "uri", "uri": "https://agent.example"}}})
    signals.remember("ses_a", SessionState(active=True, client_id="https://agent.example", sub="u1"), mark)
    assert signals.lookup("ses_a") is None
    await signals.aclose()
