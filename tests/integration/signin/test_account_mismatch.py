"""A Session ever signed in to one account is never signed in to another (PAP §4.4,
PAP-4.8-04), whether by a new sign-in or by another account's Account Token."""

from __future__ import annotations

from typing import Any

from tests.support.agent import TestAgent

from .conftest import Company, assert_refusal


async def test_account_mismatch_by_refresh_and_by_sign_in(company: Company, agent: TestAgent) -> None:
    first = await company.sign_in(agent, "alice", "acct-A")
    second = await company.sign_in(agent, "alice", "acct-B")
    assert_refusal(await company.refresh(agent, first["refresh_token"], session_id=second["session_id"]),
                   400, "account_mismatch")
    # A new sign-in of the first Session to the other account.
    started = (await company.device(agent, "poppy:read")).json()
    await company.approve(started["user_code"], "acct-B", "poppy:read")
    assert_refusal(await company.poll(agent, started["device_code"], first["session_id"]), 400, "account_mismatch")
    # Same account again is fine.
    again = await company.sign_in(agent, "alice", "acct-A", session_id=first["session_id"])
    assert again["session_id"] == first["session_id"] and again["signed_in"] is True


async def test_account_mismatch_after_sign_out(company: Company, agent: TestAgent, db: Any) -> None:
    first = await company.sign_in(agent, "bob", "acct-A")
    other = await company.sign_in(agent, "bob", "acct-B")
    assert (await company.revoke(agent, first["refresh_token"])).status_code == 200
    renewed = await company.session(agent, "bob", session_id=first["session_id"])
    assert renewed["signed_in"] is False and "scope" not in renewed
    assert_refusal(await company.refresh(agent, other["refresh_token"], session_id=first["session_id"]),
                   400, "account_mismatch")
    bound = await db.fetchval("SELECT bound_account FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                              company.tenant.id, first["session_id"])
    assert bound == "acct-A"
