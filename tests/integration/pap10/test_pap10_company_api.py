"""The company's side of a 1.0 operation (ADR 0004 §9): the caller it verified, in the proposal.

A 1.0 Session is named by Frontdoor's ``ses_`` ID or by the ``sid`` its agent chose (unique
per ``client_id``); the proposal binds to the access token's account the company passes.
"""

from __future__ import annotations

from typing import Any

from tests.integration.pap10.conftest import Shop1, new_agent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Pap10Agent, Session


async def test_a_proposal_may_name_the_1_0_session_by_its_agents_sid(shop: Shop1, agent: Pap10Agent, user: Session,
                                                                     db: Any) -> None:
    ses = await shop.seen(db, agent, user)
    r = await shop.propose(user.sid, agent, user)
    assert r.status_code == 201, r.text
    op = r.json()["operation"]
    details = (await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}",
                                     headers=shop.api)).json()["details"]
    assert details["session_id"] == ses and details["user_id"] == user.sub and details["account"] is None
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_another_agents_sid_or_user_is_refused(shop: Shop1, agent: Pap10Agent, user: Session, web: MockWeb,
                                                     clock: ShiftableClock, db: Any) -> None:
    await shop.seen(db, agent, user)
    other = new_agent(web, clock)
    r = await shop.propose(user.sid, other, user)  # the sid is unique per client_id only
    assert r.status_code == 409 and r.json()["code"] == "session_inactive", r.text
    r = await shop.propose(user.sid, agent, Session(sub=user.sub + "x", sid=user.sid))
    assert r.status_code == 409 and r.json()["code"] == "session_inactive", r.text


async def test_a_1_0_proposal_binds_to_the_account_the_company_passes(shop: Shop1, agent: Pap10Agent,
                                                                      user: Session, db: Any) -> None:
    op = await shop.operation(db, agent, user, account="acct_ada")
    details = (await shop.ledger.get(f"/{shop.tenant.slug}/v1/operations/{op['operation_id']}",
                                     headers=shop.api)).json()["details"]
    assert details["account"] == "acct_ada"
    r = await shop.read(agent, user, op["operation_id"])  # signed out: the account's operation needs sign-in
    assert r.status_code == 401 and r.json()["error"] == "sign_in_required"


async def test_an_ended_1_0_session_cannot_be_proposed_for(shop: Shop1, agent: Pap10Agent, user: Session,
                                                           db: Any) -> None:
    ses = await shop.seen(db, agent, user)
    for action in ("block", "unblock"):
        r = await shop.console.post(f"/api/v1/agents/{action}", json={"client_id": agent.client_id},
                                    headers=shop.tenant.auth)
        assert r.status_code == 200
    r = await shop.propose(ses, agent, user)
    assert r.status_code == 409 and r.json()["code"] == "session_inactive", r.text
