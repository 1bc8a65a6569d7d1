"""PAP 1.0 Session state from the real issuer's Shared Signals stream (ADR 0005 §7).

The 0.2 twin is test_shared_signals.py (its Route, stall and fast leases are reused); the
receiver's rules for 1.0 (order, gaps, forged and replayed SETs) are in
tests/unit/sdk/test_signals_pap10.py. Here: a 1.0 request is answered from memory while the
stream is live, and a blocked agent is refused on the next request, with the stream live
and with the stream stalled (the block returns only after the receiver was marked behind
and its lease ran out).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from frontdoor_protocol import mint_delegation, mint_poppy_session
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal
from joserfc.jwk import ECKey
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.support.agent import TestAgent
from tests.support.eventually import eventually

from .conftest import Company
from .test_shared_signals import API, Route, _live, _stall, call, fast_streams

__all__ = ["fast_streams"]  # the autouse fixture: short holds and leases here too


class CountingRoute(Route):
    def __init__(self, issuer: AsyncTestClient[Any]) -> None:
        super().__init__(issuer)
        self.state_asks = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/poppy/session-state"):
            self.state_asks += 1
        return await super().handle_async_request(request)


class Signer:
    """A 1.0 agent on top of the published TestAgent: its identity key delegates a P-256 key."""

    def __init__(self, agent: TestAgent, company: Company) -> None:
        self.agent, self.company = agent, company
        self.delegated = ECKey.generate_key("P-256")
        now = company.now()
        self.delegation = mint_delegation(identity_key=agent.key, kid=agent.kid, client_id=agent.client_id,
                                          delegated_key=self.delegated, iat=now - 5, exp=now + 3600,
                                          jti=unique("dlg-"))
        self.sid = unique("sid-")

    def headers(self) -> list[tuple[str, str]]:
        jwt = mint_poppy_session(delegated_key=self.delegated, delegation=self.delegation,
                                 client_id=self.agent.client_id, audience=self.company.tenant.issuer, sid=self.sid,
                                 sub="alice", method="GET", url=API, iat=self.company.now(), jti=unique("jti-"))
        return [("Poppy-Session", jwt)]


@pytest.fixture
async def route(issuer: AsyncTestClient[Any]) -> CountingRoute:
    return CountingRoute(issuer)


@pytest.fixture
async def verifier(company: Company, route: CountingRoute) -> AsyncIterator[FrontdoorVerifier]:
    http = httpx.AsyncClient(transport=route, base_url="https://issuer.frontdoor.test")
    v = FrontdoorVerifier(company.tenant.issuer, company.credential, http=http, clock=company.clock,
                          shared_signals=True)
    async with v:
        await eventually(_live(v))
        yield v
    await http.aclose()


async def _from_memory(v: FrontdoorVerifier, route: CountingRoute, signer: Signer) -> None:
    """Verify until a request is answered without ``session-state`` (an answer asked while an
    event was applied is not kept, so it may take a few)."""
    async def probe() -> None:
        first = await v.verify("GET", API, signer.headers())
        assert isinstance(first, Caller) and first.profile == "1.0", first
        before = route.state_asks
        again = await v.verify("GET", API, signer.headers())
        assert isinstance(again, Caller), again
        assert route.state_asks == before, "a live stream answers 1.0 from memory"
    await eventually(probe)


async def test_a_blocked_agent_with_a_live_stream_is_refused_on_the_next_request(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent, verifier: FrontdoorVerifier,
        route: CountingRoute) -> None:
    signer = Signer(agent, company)
    await _from_memory(verifier, route, signer)
    r = await call(console, "POST", "/api/v1/agents/block", json={"client_id": agent.client_id},
                   headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    after = await verifier.verify("GET", API, signer.headers())
    assert isinstance(after, Refusal) and (after.status, after.error) == (400, "invalid_session")
    await call(console, "POST", "/api/v1/agents/unblock", json={"client_id": agent.client_id},
               headers=company.tenant.auth)


async def test_a_stalled_stream_is_marked_behind_and_the_next_1_0_request_is_refused(
        console: AsyncTestClient[Any], company: Company, agent: TestAgent, verifier: FrontdoorVerifier,
        route: CountingRoute, db: Any) -> None:
    signer = Signer(agent, company)
    await _from_memory(verifier, route, signer)
    await _stall(route)
    r = await call(console, "POST", "/api/v1/agents/block", json={"client_id": agent.client_id},
                   headers=company.tenant.auth)
    assert r.status_code == 200, r.text
    signals = verifier.signals
    assert signals is not None and not signals.live, "its lease ran out before the block answered"
    asks = route.state_asks
    after = await verifier.verify("GET", API, signer.headers())
    assert isinstance(after, Refusal) and (after.status, after.error) == (400, "invalid_session")
    assert route.state_asks == asks + 1, "refused by Frontdoor's answer (the fallback), not from memory"
    assert await db.fetchval("SELECT behind FROM ssf_streams WHERE tenant_id = $1 AND id = $2",
                             company.tenant.id, signals.stream_id) is True
    route.flowing.set()
    await eventually(_live(verifier))
    await call(console, "POST", "/api/v1/agents/unblock", json={"client_id": agent.client_id},
               headers=company.tenant.auth)
