"""An Account Token refresh into a Session idle longer than FRONTDOOR_SESSION_RETENTION (90 days
by default) is refused like one into an ended Session (ADR 0007); without session_id it starts
a new Session as before."""

from __future__ import annotations

from typing import Any

from tests.support.agent import TestAgent

from .conftest import Company, assert_refusal


async def test_refresh_into_an_idle_session_is_invalid_session(company: Company, agent: TestAgent, db: Any) -> None:
    first = await company.sign_in(agent, "carol", "acct-C")
    await db.execute("UPDATE pap_sessions SET last_used_at = now() - interval '91 days' WHERE tenant_id = $1 AND id = $2",
                     company.tenant.id, first["session_id"])
    assert_refusal(await company.refresh(agent, first["refresh_token"], session_id=first["session_id"]),
                   400, "invalid_session")
    fresh = await company.refresh(agent, first["refresh_token"])
    assert fresh.status_code == 200, fresh.text
    assert fresh.json()["session_id"] != first["session_id"] and fresh.json()["signed_in"] is True
