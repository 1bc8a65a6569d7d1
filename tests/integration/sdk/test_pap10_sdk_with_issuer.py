"""The sdk's 1.0 way against the real issuer's agent-keys and session-state (ADR 0004 §6).

The verifier's HTTP client is the issuer's in-process test client, over the worker's real
PostgreSQL and Redis; the agent signs with the protocol library's agent-side helpers.
"""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_protocol import mint_delegation, mint_poppy_session
from frontdoor_sdk import Caller, FrontdoorVerifier, Refusal
from joserfc.jwk import ECKey
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb

API_URL = "https://shop.example/api/orders"


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


async def _credential(console: AsyncTestClient[Any], tenant: TenantHandle) -> str:
    r = await console.post("/api/v1/resource-credentials", json={"name": "sdk-1.0"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    return str(r.json()["secret"])


class Signer:
    """A 1.0 agent on top of the published TestAgent: its identity key delegates a P-256 key."""

    def __init__(self, agent: TestAgent, tenant: TenantHandle, clock: ShiftableClock) -> None:
        self.agent, self.tenant, self.clock = agent, tenant, clock
        self.delegated = ECKey.generate_key("P-256")
        now = self.now()
        self.delegation = mint_delegation(identity_key=agent.key, kid=agent.kid, client_id=agent.client_id,
                                          delegated_key=self.delegated, iat=now - 5, exp=now + 3600,
                                          jti=unique("dlg-"))
        self.sid = unique("sid-")

    def now(self) -> int:
        return int(self.clock().timestamp())

    def headers(self, method: str, url: str, *, sub: str = "alice") -> list[tuple[str, str]]:
        jwt = mint_poppy_session(delegated_key=self.delegated, delegation=self.delegation,
                                 client_id=self.agent.client_id, audience=self.tenant.issuer, sid=self.sid, sub=sub,
                                 method=method, url=url, iat=self.now(), jti=unique("jti-"))
        return [("Poppy-Session", jwt)]


async def test_a_1_0_session_is_verified_replays_and_blocks_refused(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
    clock: ShiftableClock,
) -> None:
    """Signed out: a 1.0 Caller with Frontdoor's ses_ ID; a replay and a changed sub are
    invalid_session; scopes need sign-in (401 + resource_metadata); a blocked agent is refused."""
    secret = await _credential(console, tenant)
    verifier = FrontdoorVerifier(tenant.issuer, secret, http=issuer, clock=clock)
    signer = Signer(agent, tenant, clock)
    headers = signer.headers("GET", API_URL)
    caller = await verifier.verify("GET", API_URL, headers)
    assert isinstance(caller, Caller), caller
    assert (caller.profile, caller.client_id, caller.user_id, caller.session_id, caller.signed_in) == (
        "1.0", agent.client_id, "alice", signer.sid, False)
    assert caller.frontdoor_session_id is not None and caller.frontdoor_session_id.startswith("ses_")
    # The same JWT to a second replica (its own replay cache): Frontdoor's jti claim refuses it.
    replica = FrontdoorVerifier(tenant.issuer, secret, http=issuer, clock=clock)
    replayed = await replica.verify("GET", API_URL, headers)
    assert isinstance(replayed, Refusal) and (replayed.status, replayed.error) == (400, "invalid_session")
    changed = await verifier.verify("GET", API_URL, signer.headers("GET", API_URL, sub="mallory"))
    assert isinstance(changed, Refusal) and (changed.status, changed.error) == (400, "invalid_session")
    needs = await verifier.verify("GET", API_URL, signer.headers("GET", API_URL), required_scopes=["orders:read"])
    assert isinstance(needs, Refusal) and (needs.status, needs.error) == (401, "sign_in_required")
    assert needs.headers["WWW-Authenticate"] == (
        'Bearer scope="orders:read", resource_metadata="https://shop.example/.well-known/oauth-protected-resource"')
    r = await console.post("/api/v1/agents/block", json={"client_id": agent.client_id}, headers=tenant.auth)
    assert r.status_code == 200
    fresh = FrontdoorVerifier(tenant.issuer, secret, http=issuer, clock=clock)  # no cached keys
    blocked = await fresh.verify("GET", API_URL, signer.headers("GET", API_URL))
    assert isinstance(blocked, Refusal) and (blocked.status, blocked.error) == (400, "invalid_session")
    await console.post("/api/v1/agents/unblock", json={"client_id": agent.client_id}, headers=tenant.auth)


async def test_a_wrong_credential_never_allows_a_1_0_request(
    issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent, clock: ShiftableClock,
) -> None:
    verifier = FrontdoorVerifier(tenant.issuer, "fdrs_AAAAAAAA_" + "b" * 43, http=issuer, clock=clock)
    outcome = await verifier.verify("GET", API_URL, Signer(agent, tenant, clock).headers("GET", API_URL))
    assert isinstance(outcome, Refusal) and (outcome.status, outcome.error) == (500, "server_error")
