"""Revocation and sign-out (PAP §4.9, RFC 7009): the whole family, every Session of it,
signed out from the very next request; Sessions continue signed out."""

from __future__ import annotations

from typing import Any

from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb

from .conftest import Company, assert_refusal, new_agent


async def test_revoke_signs_out_every_session_of_the_family(company: Company, agent: TestAgent, db: Any) -> None:
    signed = await company.sign_in(agent, "alice", "acct-1")
    second = await company.session(agent, "alice")
    rotated = await company.refresh(agent, signed["refresh_token"], session_id=second["session_id"])
    assert rotated.status_code == 200, rotated.text
    newest = rotated.json()["refresh_token"]
    assert (await company.introspect(signed["access_token"]))["signed_in"] is True

    r = await company.revoke(agent, newest)
    assert r.status_code == 200, r.text
    assert r.headers["cache-control"] == "no-store"
    # The very next introspection of either Session's earlier token is signed out.
    for token in (signed["access_token"], rotated.json()["access_token"]):
        state = await company.introspect(token)
        assert state["active"] is True and state["signed_in"] is False
        assert state["account"] is None and state["scope"] is None
    # The Session continues, signed out; renewal says so.
    renewed = await company.session(agent, "alice", session_id=signed["session_id"])
    assert renewed["session_id"] == signed["session_id"] and renewed["signed_in"] is False
    # Every token of the family, the rotated-away one included, is now invalid_grant.
    for token in (signed["refresh_token"], newest):
        assert_refusal(await company.refresh(agent, token, session_id=signed["session_id"]), 400, "invalid_grant")

    events = [r["type"] for r in await db.fetch(
        "SELECT type FROM session_events WHERE tenant_id = $1 ORDER BY id", company.tenant.id)]
    assert events.count("session.signed_in") == 2 and events.count("account.revoked") == 1
    assert events.count("session.signed_out") == 2
    audit = await db.fetchrow("SELECT actor_type, details FROM audit_log WHERE tenant_id = $1"
                              " AND action = 'account_token.revoked'", company.tenant.id)
    assert audit["actor_type"] == "system" and audit["details"]["sessions_signed_out"] == 2
    assert audit["details"]["client_id"] == agent.client_id


async def test_unknown_and_other_clients_tokens(company: Company, agent: TestAgent, web: MockWeb) -> None:
    """RFC 7009 §2.2: 200 for what is not revocable by this client, which stays untouched."""
    other = new_agent(web)
    signed = await company.sign_in(agent, "bob", "acct-2")
    for token in ("fdat_" + "A" * 43, "anything", signed["access_token"]):
        r = await company.revoke(agent, token)
        assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    assert (await company.revoke(other, signed["refresh_token"])).status_code == 200
    assert (await company.introspect(signed["access_token"]))["signed_in"] is True
    assert (await company.refresh(agent, signed["refresh_token"], session_id=signed["session_id"])).status_code == 200


async def test_revocation_refusals(company: Company, agent: TestAgent) -> None:
    signed = await company.sign_in(agent, "carol", "acct-3")
    url = f"/{company.tenant.slug}/oauth/revoke"
    r = await company.issuer.post(url, data={"token": signed["refresh_token"]})
    assert_refusal(r, 401, "invalid_client")
    form = {**company.client_form(agent), "token": signed["refresh_token"]}
    bad = dict(form, client_assertion=form["client_assertion"][:-4] + "AAAA")
    assert_refusal(await company.issuer.post(url, data=bad), 401, "invalid_client")
    assert_refusal(await company.issuer.post(url, data={k: v for k, v in form.items() if k != "token"}),
                   400, "invalid_request")
    assert (await company.issuer.post(url, data=form)).status_code == 200
    assert_refusal(await company.issuer.post(url, data=form), 401, "invalid_client")  # assertion replayed
    assert (await company.introspect(signed["access_token"]))["signed_in"] is False


async def test_a_later_sign_in_of_the_session_is_not_signed_out_by_an_older_family(company: Company,
                                                                                   agent: TestAgent) -> None:
    first = await company.sign_in(agent, "dan", "acct-4")
    again = await company.sign_in(agent, "dan", "acct-4", session_id=first["session_id"])
    assert (await company.revoke(agent, first["refresh_token"])).status_code == 200
    assert (await company.introspect(again["access_token"]))["signed_in"] is True
    assert (await company.revoke(agent, again["refresh_token"])).status_code == 200
    assert (await company.introspect(again["access_token"]))["signed_in"] is False
