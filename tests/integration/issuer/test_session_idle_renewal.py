"""A Session idle longer than FRONTDOOR_SESSION_RETENTION (90 days by default) is not renewed (ADR 0007)."""

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


async def _grant(issuer: AsyncTestClient[Any], t: TenantHandle, agent: TestAgent, **extra: str) -> Any:
    form = agent.token_form(t.issuer, "alice", **extra)
    return await issuer.post(f"/{t.slug}/oauth/token", data=form,
                             headers={"DPoP": agent.dpop("POST", f"{t.issuer}/oauth/token")})


async def test_a_session_idle_beyond_retention_is_refused_like_an_ended_one(
        issuer: AsyncTestClient[Any], tenant: TenantHandle, agent: TestAgent, db: Any) -> None:
    """PAP-4.2-04: renewal names a live Session; one idle past the idle lifetime is invalid_session."""
    sid = (await _grant(issuer, tenant, agent)).json()["session_id"]
    await db.execute("UPDATE pap_sessions SET last_used_at = now() - interval '89 days' WHERE tenant_id = $1 AND id = $2",
                     tenant.id, sid)
    kept = await _grant(issuer, tenant, agent, session_id=sid)
    assert kept.status_code == 200, kept.text
    assert kept.json()["session_id"] == sid
    await db.execute("UPDATE pap_sessions SET last_used_at = now() - interval '91 days' WHERE tenant_id = $1 AND id = $2",
                     tenant.id, sid)
    idle = await _grant(issuer, tenant, agent, session_id=sid)
    assert idle.status_code == 400
    assert idle.json()["error"] == "invalid_session"
    last_used = await db.fetchval("SELECT last_used_at < now() - interval '90 days' FROM pap_sessions"
                                  " WHERE tenant_id = $1 AND id = $2", tenant.id, sid)
    assert last_used is True  # a refused renewal does not touch the Session
