"""A 1.0 Session's state across requests at the ledger (ADR 0004 §5, §6; [S §3, §4]).

The agent names the Session; Frontdoor remembers (tenant, ``client_id``, ``sid``) with its
``sub`` and ``agent_id``, ends it when the company blocks the agent, and keeps it across
delegated-key rotations. The agent's identity keys are loaded from its CIMD and JWKS; an
unknown ``kid`` reloads them, at most once per 30 s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.pap10.conftest import Shop1, new_agent
from tests.integration.pap10.test_pap10_session_header import assert_invalid_session
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Pap10Agent, Session


async def block(console: AsyncTestClient[Any], t: TenantHandle, agent: Pap10Agent, action: str = "block") -> None:
    r = await console.post(f"/api/v1/agents/{action}", json={"client_id": agent.client_id}, headers=t.auth)
    assert r.status_code == 200, r.text


async def test_the_first_request_creates_one_signed_out_session_later_ones_reuse_it(
        shop: Shop1, agent: Pap10Agent, user: Session, db: Any) -> None:
    # [S §3] "A new SID starts a signed-out Session"; ADR 0004 §5: one row, an internal ses_ ID.
    op = await shop.operation(db, agent, user)
    for _ in range(2):
        assert (await shop.read(agent, user, op["operation_id"])).status_code == 200
    rows = await db.fetch("SELECT id, user_id, signed_in_at, profile FROM pap_sessions WHERE tenant_id = $1"
                          " AND client_id = $2", shop.tenant.id, agent.client_id)
    assert len(rows) == 1
    assert rows[0]["id"].startswith("ses_") and rows[0]["user_id"] == user.sub
    assert rows[0]["profile"] == "1.0" and rows[0]["signed_in_at"] is None


async def test_a_changed_sub_in_a_known_session_is_refused(shop: Shop1, agent: Pap10Agent, user: Session,
                                                           db: Any) -> None:
    # [S §3] "Known Sessions retain the same sub" (ADR 0004 §5: invalid_session).
    op = await shop.operation(db, agent, user)
    other_user = replace(user, sub=user.sub + "x")
    assert_invalid_session(await shop.read(agent, other_user, op["operation_id"]))
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_an_agent_id_that_appears_or_changes_is_refused(shop: Shop1, agent: Pap10Agent, user: Session,
                                                              db: Any) -> None:
    # [S §3] agent_id "unchanged or absent for the entire Session".
    op = await shop.operation(db, agent, user)
    assert_invalid_session(await shop.read(agent, replace(user, agent_id="instance-2"), op["operation_id"]))
    named = Session(sub=user.sub, agent_id="instance-1")
    assert (await shop.read(agent, named, "op_" + "0" * 26)).status_code == 404  # a new Session, named
    assert_invalid_session(await shop.read(agent, replace(named, agent_id="instance-2"), "op_" + "0" * 26))
    assert_invalid_session(await shop.read(agent, replace(named, agent_id=None), "op_" + "0" * 26))


async def test_the_same_sid_of_another_client_is_another_session(shop: Shop1, agent: Pap10Agent, user: Session,
                                                                 web: MockWeb, clock: ShiftableClock,
                                                                 db: Any) -> None:
    # ADR 0004 §2: Sessions are keyed by (tenant, client_id, sid); the other agent does not see the operation.
    op = await shop.operation(db, agent, user)
    other = new_agent(web, clock)
    r = await shop.read(other, user, op["operation_id"])
    assert r.status_code == 404 and r.json()["error"] == "operation_not_found"


async def test_delegated_keys_rotate_between_requests_in_one_session(shop: Shop1, agent: Pap10Agent, user: Session,
                                                                     db: Any) -> None:
    # [S §3] "Delegated keys MUST be allowed to rotate between requests; the key is not the Session identity."
    op = await shop.operation(db, agent, user)
    session_id = await shop.session_id(db, agent, user)
    for _ in range(3):
        agent.rotate()
        assert (await shop.read(agent, user, op["operation_id"])).status_code == 200
    assert await shop.session_id(db, agent, user) == session_id


async def test_an_ended_session_answers_session_ended_and_the_agent_recovers_with_a_new_sid(
        shop: Shop1, agent: Pap10Agent, user: Session, db: Any) -> None:
    # [S §4] remembered ended Session: 400 session_ended; the client uses a new SID and retries once.
    op = await shop.operation(db, agent, user)
    await block(shop.console, shop.tenant, agent)
    await block(shop.console, shop.tenant, agent, "unblock")
    ended = await shop.read(agent, user, op["operation_id"])
    assert_invalid_session(ended, "session_ended")
    r, renewed = await agent.call(shop.ledger, "GET", shop.url(op["operation_id"]), user, aud=shop.tenant.issuer)
    assert renewed.sid != user.sid and renewed.sub == user.sub
    # The new Session is the same agent and user: Ops v1 ownership is (client_id, sub), not the sid.
    assert r.status_code == 200, r.text
    # Still ended for the old sid: a second ended answer stops an agent [S §4].
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]), "session_ended")


async def test_a_blocked_agent_is_refused_with_invalid_session(shop: Shop1, agent: Pap10Agent, user: Session,
                                                               db: Any) -> None:
    # ADR 0004 §7: client refused -> invalid_session (and its Sessions end, ADR 0004 §5).
    op = await shop.operation(db, agent, user)
    await block(shop.console, shop.tenant, agent)
    assert_invalid_session(await shop.read(agent, user.renewed(), op["operation_id"]))


async def test_an_unknown_kid_reloads_the_agents_keys_at_most_every_30_seconds(
        shop: Shop1, agent: Pap10Agent, user: Session, web: MockWeb, clock: ShiftableClock, db: Any) -> None:
    # ADR 0004 §6: an unknown kid reloads the JWKS, at most every 30 s (keys rotate at the agent).
    op = await shop.operation(db, agent, user)
    agent.rotate_identity()
    agent.publish(web)
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200  # reloaded once
    agent.rotate_identity()
    agent.publish(web)
    fetches = len(web.requests)
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]))  # within 30 s: no reload
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]))
    assert not [r for r in web.requests[fetches:] if r.url.path == "/jwks.json" and r.url.host in agent.origin]
    clock.advance(seconds=31)
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_a_cimd_behind_a_redirect_is_refused(shop: Shop1, web: MockWeb, clock: ShiftableClock,
                                                   user: Session) -> None:
    # [S §3] "publishes HTTPS CIMD metadata at its exact client_id, without redirects".
    agent = new_agent(web, clock)
    moved = f"{agent.origin}/moved/agent.json"
    web.serve(moved, json={**agent.metadata()})
    web.redirect(agent.client_id, moved)
    assert_invalid_session(await shop.read(agent, user, "op_" + "0" * 26))


async def test_a_cimd_whose_client_id_differs_from_its_url_is_refused(shop: Shop1, web: MockWeb,
                                                                      clock: ShiftableClock, user: Session) -> None:
    # [S §3] the CIMD's client_id is its exact URL.
    agent = new_agent(web, clock)
    web.serve(agent.client_id, json={**agent.metadata(), "client_id": agent.client_id + "?x=1"})
    assert_invalid_session(await shop.read(agent, user, "op_" + "0" * 26))


async def test_a_jwks_on_another_host_is_refused(shop: Shop1, web: MockWeb, clock: ShiftableClock,
                                                 user: Session) -> None:
    # [S §3] "jwks_uri is HTTPS on that same hostname".
    agent = new_agent(web, clock)
    elsewhere = "https://keys-elsewhere.example/jwks.json"
    web.serve(elsewhere, json=agent.jwks())
    web.serve(agent.client_id, json={**agent.metadata(), "jwks_uri": elsewhere})
    assert_invalid_session(await shop.read(agent, user, "op_" + "0" * 26))


async def test_a_minimal_cimd_is_enough_for_signed_out_use(shop: Shop1, web: MockWeb, clock: ShiftableClock,
                                                           user: Session) -> None:
    # [S §3] "Signed-out CIMD needs only client_id and jwks_uri".
    agent = new_agent(web, clock, minimal_metadata=True)
    r = await shop.read(agent, user, "op_" + "0" * 26)
    assert r.status_code == 404 and r.json()["error"] == "operation_not_found", r.text


async def test_keys_that_cannot_be_loaded_answer_503_with_retry_after(shop: Shop1, web: MockWeb,
                                                                      clock: ShiftableClock, user: Session) -> None:
    # ADR 0004 §7 [Q3]: agent keys unavailable -> 503 + Retry-After, never a guess either way.
    agent = new_agent(web, clock)
    web.forget(agent.origin.removeprefix("https://"))
    r = await shop.read(agent, user, "op_" + "0" * 26)
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) > 0
