"""The jwt-bearer Session grant at the token endpoint, asserted on the wire (PAP §4.1-§4.3)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb


@pytest.fixture
def agent(web: MockWeb) -> TestAgent:
    return TestAgent(host=f"{unique('agent-')}.example").publish(web)


def token_url(t: TenantHandle) -> str:
    return f"{t.issuer}/oauth/token"


async def start(issuer: AsyncTestClient[Any], t: TenantHandle, agent: TestAgent, user: str = "user-1",
                **extra: str) -> Any:
    form = agent.token_form(t.issuer, user, **extra)
    return await issuer.post(f"/{t.slug}/oauth/token", data=form,
                             headers={"DPoP": agent.dpop("POST", token_url(t))})


async def test_a_session_starts_signed_out(issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent,
                                           db: Any) -> None:
    """PAP-4.2-01/02: a DPoP-bound Session Token, no scope, signed_in false, a session_id."""
    r = await start(issuer, tenant, agent)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["token_type"] == "DPoP"
    assert body["signed_in"] is False
    assert "scope" not in body
    assert 0 < body["expires_in"] <= 86400
    assert body["session_id"].startswith("ses_")
    assert r.headers["cache-control"] == "no-store"
    row = await db.fetchrow("SELECT client_id, user_id, ended_at FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                            tenant.id, body["session_id"])
    assert row["client_id"] == agent.client_id and row["user_id"] == "user-1" and row["ended_at"] is None
    seen = await db.fetchrow("SELECT client_name FROM agents WHERE tenant_id = $1 AND client_id = $2",
                             tenant.id, agent.client_id)
    assert seen["client_name"] == agent.name


async def test_renewal_keeps_the_session_and_other_users_cannot(issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                                agent: TestAgent, web: MockWeb) -> None:
    """PAP-4.2-04: renewal with session_id keeps it; another user's is invalid_session."""
    first = (await start(issuer, tenant, agent, "alice")).json()
    again = await start(issuer, tenant, agent, "alice", session_id=first["session_id"])
    assert again.status_code == 200 and again.json()["session_id"] == first["session_id"]
    other_user = await start(issuer, tenant, agent, "bob", session_id=first["session_id"])
    assert other_user.status_code == 400 and other_user.json()["error"] == "invalid_session"
    other_agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    r = await start(issuer, tenant, other_agent, "alice", session_id=first["session_id"])
    assert r.json()["error"] == "invalid_session"
    parallel = (await start(issuer, tenant, agent, "alice")).json()
    assert parallel["session_id"] != first["session_id"]


async def test_replayed_assertions_and_proofs_are_refused(issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                          agent: TestAgent) -> None:
    form = agent.token_form(tenant.issuer, "u")
    proof = agent.dpop("POST", token_url(tenant))
    assert (await issuer.post(f"/{tenant.slug}/oauth/token", data=form, headers={"DPoP": proof})).status_code == 200
    again = await issuer.post(f"/{tenant.slug}/oauth/token", data=form,
                              headers={"DPoP": agent.dpop("POST", token_url(tenant))})
    assert again.status_code in (400, 401) and again.json()["error"] in ("invalid_client", "invalid_grant")
    fresh = agent.token_form(tenant.issuer, "u")
    replayed_proof = await issuer.post(f"/{tenant.slug}/oauth/token", data=fresh, headers={"DPoP": proof})
    assert replayed_proof.json()["error"] == "invalid_dpop_proof"


@pytest.mark.parametrize(("mutate", "error"), [
    (lambda a, t: {"client_assertion": a.client_assertion(f"{t.issuer}/oauth/token")}, "invalid_client"),
    (lambda a, t: {"client_assertion": a.client_assertion(t.issuer, exp=None)}, "invalid_client"),
    (lambda a, t: {"assertion": a.session_assertion(t.issuer, "u", aud=f"{t.issuer}/oauth/token")}, "invalid_grant"),
    (lambda a, t: {"assertion": a.session_assertion(t.issuer, "u", exp=int(__import__("time").time()) + 900)},
     "invalid_grant"),
    (lambda a, t: {"client_assertion_type": "urn:nope"}, "invalid_client"),
    (lambda a, t: {"grant_type": "client_credentials"}, "unsupported_grant_type"),
    (lambda a, t: {"resource": "https://unknown.example/mcp"}, "invalid_target"),
])
async def test_refusals(issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent, mutate: Any,
                        error: str) -> None:
    form = agent.token_form(tenant.issuer, "u")
    form.update(mutate(agent, tenant))
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=form,
                          headers={"DPoP": agent.dpop("POST", token_url(tenant))})
    assert r.json()["error"] == error, r.text
    assert r.status_code in (400, 401)
    assert r.headers["cache-control"] == "no-store"
    assert "eyJ" not in r.text  # never echoes a credential


async def test_dpop_rules_at_the_token_endpoint(issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                                agent: TestAgent) -> None:
    """PAP-4.3-04/07/19: exactly one proof, htm/htu match, no ath here."""
    url = token_url(tenant)
    cases = {
        "none": [],
        "two": [("DPoP", agent.dpop("POST", url)), ("DPoP", agent.dpop("POST", url))],
        "wrong_method": [("DPoP", agent.dpop("GET", url))],
        "wrong_url": [("DPoP", agent.dpop("POST", url + "x"))],
        "ath": [("DPoP", agent.dpop("POST", url, token="abc"))],
    }
    for name, headers in cases.items():
        r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u"),
                              headers=headers)
        assert r.status_code == 400, name
        assert r.json()["error"] == "invalid_dpop_proof", (name, r.text)


async def test_unknown_client_metadata_is_invalid_client(issuer: AsyncTestClient[Any], tenant: TenantHandle) -> None:
    ghost = TestAgent(host=f"{unique('ghost-')}.example")  # never published
    r = await start(issuer, tenant, ghost)
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"


async def test_form_rules(issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent) -> None:
    r = await issuer.post(f"/{tenant.slug}/oauth/token", json={"grant_type": "x"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"
    form = agent.token_form(tenant.issuer, "u")
    body = "&".join(f"{k}={v}" for k, v in form.items()) + "&grant_type=x"
    r = await issuer.post(f"/{tenant.slug}/oauth/token", content=body,
                          headers={"content-type": "application/x-www-form-urlencoded",
                                   "DPoP": agent.dpop("POST", token_url(tenant))})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request"


async def test_sessions_are_tenant_scoped(issuer: AsyncTestClient[Any], tenant: TenantHandle,
                                          other_tenant: TenantHandle, agent: TestAgent) -> None:
    first = (await start(issuer, tenant, agent, "alice")).json()
    # A's Session cannot be renewed at B; B's issuer refuses assertions for A's issuer.
    r = await start(issuer, other_tenant, agent, "alice", session_id=first["session_id"])
    assert r.json()["error"] == "invalid_session"
    form = agent.token_form(tenant.issuer, "alice")
    r = await issuer.post(f"/{other_tenant.slug}/oauth/token", data=form,
                          headers={"DPoP": agent.dpop("POST", token_url(other_tenant))})
    assert r.json()["error"] == "invalid_client"
