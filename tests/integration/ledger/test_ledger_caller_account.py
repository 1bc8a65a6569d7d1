"""The caller's ``account`` in a proposal (ADR 0004 §9): under 0.2 the account is the Session's
own sign-in, and an ``account`` the company sends must be that one."""

from __future__ import annotations

from tests.conftest import unique
from tests.integration.ledger.conftest import Shop
from tests.support.agent import TestAgent


async def test_a_0_2_caller_with_its_sessions_account_binds_the_operation_to_it(shop: Shop, agent: TestAgent) -> None:
    user, account = unique("usr_"), unique("acct_")
    tokens = await shop.company.sign_in(agent, user, account)
    caller = {"session_id": tokens["session_id"], "client_id": agent.client_id, "user_id": user, "account": account}
    r = await shop.propose(tokens, agent, user, caller=caller)
    assert r.status_code == 201, r.text
    details = (await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations/{r.json()['operation']['operation_id']}",
                                     headers=shop.api)).json()["details"]
    assert details["account"] == account


async def test_a_0_2_caller_naming_another_account_is_refused(shop: Shop, agent: TestAgent) -> None:
    user = unique("usr_")
    tokens = await shop.company.sign_in(agent, user, unique("acct_"))
    caller = {"session_id": tokens["session_id"], "client_id": agent.client_id, "user_id": user,
              "account": unique("acct_")}
    r = await shop.propose(tokens, agent, user, caller=caller)
    assert r.status_code == 409 and r.json()["code"] == "session_inactive", r.text
    listed = (await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations", headers=shop.api)).json()
    assert listed["items"] == []
