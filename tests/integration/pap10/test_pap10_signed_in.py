"""Account access under 1.0 at the ledger: the ``Poppy-Session`` JWT plus an ordinary access
token of the same client, bound by ``ath`` [S §3, §5]; ADR 0004 §4, §7, §9.

The agent signs in by Device Sign-In at the real issuer (no ``session_id``: sign-in is
independent of Session identity), the user's approval played through the device store.
Operations follow the Ops v1 rules: owned by (``client_id``, ``sub``), bound to the access
token's account, confirmed once.
"""

from __future__ import annotations

from typing import Any

from tests.integration.pap10.conftest import Shop1, agent_http, discovery_of, new_agent, sign_in
from tests.integration.pap10.test_pap10_session_header import assert_invalid_session
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import DROP, Knobs, Pap10Agent, Session


async def signed_in(shop: Shop1, agent: Pap10Agent, web: MockWeb, store: Any, account: str = "acct_ada") -> None:
    r = await sign_in(shop, agent, web, store, account)
    assert r.status_code == 200, r.text
    body = r.json()
    # ADR 0004 §4: an RFC 9068 access token and a refresh token; no Session in the answer [Q6].
    assert body["token_type"].lower() in ("bearer", "dpop") and body["refresh_token"]
    assert "session_id" not in body and "signed_in" not in body


async def test_a_signed_in_agent_confirms_an_operation_of_its_account(shop: Shop1, agent: Pap10Agent,
                                                                      user: Session, web: MockWeb, store: Any,
                                                                      db: Any) -> None:
    # ADR 0004 §9: Ops v1 under 1.0: proposed for the token's account, confirmed, performed once.
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    r = await shop.confirm(agent, user, op)
    assert r.status_code == 200, r.text
    assert r.json()["state"] in ("in_progress", "succeeded")
    assert shop.receiver.performed == {op["operation_id"]: 1}
    again = await shop.confirm(agent, user, op)  # OPS-6-02: a repeated confirm answers it unchanged
    assert again.status_code == 200 and shop.receiver.performed == {op["operation_id"]: 1}


async def test_an_accounts_operation_read_signed_out_is_sign_in_required(shop: Shop1, agent: Pap10Agent,
                                                                         user: Session, web: MockWeb, store: Any,
                                                                         db: Any) -> None:
    # OPS-3.2-01 under 1.0 (ADR 0004 §7 [Q4]): 401 with a Bearer challenge, body sign_in_required.
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    r = await shop.read(agent, user, op["operation_id"], signed_in=False)
    assert r.status_code == 401 and r.json()["error"] == "sign_in_required", r.text
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_another_accounts_operation_is_not_found(shop: Shop1, agent: Pap10Agent, user: Session,
                                                       web: MockWeb, store: Any, db: Any) -> None:
    # Ops v1 account binding by the access token's account (ADR 0004 §9).
    await signed_in(shop, agent, web, store, "acct_ada")
    op = await shop.operation(db, agent, user, account="acct_grace")
    r = await shop.read(agent, user, op["operation_id"])
    assert r.status_code == 404 and r.json()["error"] == "operation_not_found"


async def test_ath_must_bind_the_access_token(shop: Shop1, agent: Pap10Agent, user: Session, web: MockWeb,
                                              store: Any, db: Any) -> None:
    # [S §3] ath required when an access token is sent, equal to its SHA-256.
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    assert_invalid_session(await shop.read(agent, user, op["operation_id"], knobs=Knobs(ath=DROP)))
    assert_invalid_session(await shop.read(agent, user, op["operation_id"], knobs=Knobs(ath="A" * 43)))


async def test_a_token_of_another_client_is_invalid_token(shop: Shop1, agent: Pap10Agent, user: Session,
                                                          web: MockWeb, store: Any, clock: ShiftableClock,
                                                          db: Any) -> None:
    # [S §3] same-client binding; ADR 0004 §7: token failures are the OAuth challenge, never invalid_session.
    other = new_agent(web, clock)
    await signed_in(shop, other, web, store)
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    assert other.tokens is not None
    r = await shop.read(agent, user, op["operation_id"], knobs=Knobs(token=other.tokens.access_token))
    assert r.status_code == 401 and r.json()["error"] == "invalid_token", r.text
    assert 'error="invalid_token"' in r.headers["www-authenticate"]


async def test_two_credentials_in_authorization_are_refused(shop: Shop1, agent: Pap10Agent, user: Session,
                                                            web: MockWeb, store: Any, db: Any) -> None:
    # [S §5] exactly one credential, Bearer or DPoP (ADR 0004 §4).
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    assert agent.tokens is not None
    token = agent.tokens.access_token
    r = await shop.read(agent, user, op["operation_id"], knobs=Knobs(authorization=f"Bearer {token}, Bearer {token}"))
    assert r.status_code in (400, 401) and r.json()["error"] in ("invalid_request", "invalid_token"), r.text
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_the_scheme_is_compared_case_insensitively(shop: Shop1, agent: Pap10Agent, user: Session,
                                                         web: MockWeb, store: Any, db: Any) -> None:
    # [S §5] "Tokens may be Bearer or DPoP, compared case-insensitively."
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    assert agent.tokens is not None
    scheme = agent.tokens.token_type
    token = agent.tokens.access_token
    r = await shop.read(agent, user, op["operation_id"], knobs=Knobs(authorization=f"{scheme.upper()} {token}"))
    assert r.status_code == 200, r.text


async def test_revocation_is_effective_on_the_next_request_and_the_session_continues(
        shop: Shop1, agent: Pap10Agent, user: Session, web: MockWeb, store: Any, db: Any) -> None:
    # [S §5] revocation removes account access while signed-out Session activity continues (ADR 0004 §5).
    await signed_in(shop, agent, web, store)
    mine = await shop.operation(db, agent, user)  # a signed-out proposal: readable signed out
    op = await shop.operation(db, agent, user, account="acct_ada")
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200
    dead = agent.tokens
    meta = (await shop.issuer.get(f"/.well-known/oauth-authorization-server/{shop.tenant.slug}")).json()
    async with agent_http(shop, web) as http:
        r = await agent.revoke(http, discovery_of(meta))
    assert r.status_code == 200, r.text
    agent.tokens = dead  # the agent still holds the access token: it must be refused now
    r = await shop.read(agent, user, op["operation_id"])
    assert r.status_code == 401 and r.json()["error"] == "invalid_token", r.text
    agent.tokens = None
    r = await shop.read(agent, user, mine["operation_id"])
    assert r.status_code == 200, r.text  # same Session, signed out
    r = await shop.read(agent, user, op["operation_id"])
    assert r.status_code == 401 and r.json()["error"] == "sign_in_required"


async def test_a_refreshed_access_token_works(shop: Shop1, agent: Pap10Agent, user: Session, web: MockWeb,
                                              store: Any, db: Any) -> None:
    # [S §5] "Sign-in returns a refresh token; refresh may rotate it."
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    meta = (await shop.issuer.get(f"/.well-known/oauth-authorization-server/{shop.tenant.slug}")).json()
    assert agent.tokens is not None
    before = agent.tokens.access_token
    async with agent_http(shop, web) as http:
        r = await agent.refresh(http, discovery_of(meta))
    assert r.status_code == 200, r.text
    assert agent.tokens.access_token != before
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_a_dpop_bound_access_token_needs_its_proof(shop: Shop1, web: MockWeb, clock: ShiftableClock,
                                                         user: Session, store: Any, db: Any) -> None:
    # ADR 0004 §4: a token request with a DPoP proof gets a DPoP-bound token (cnf.jkt); at a
    # resource it needs the DPoP scheme and a proof by that key [S §3 "validate DPoP separately"].
    agent = new_agent(web, clock, dpop_tokens=True)
    await signed_in(shop, agent, web, store)
    assert agent.tokens is not None and agent.tokens.token_type.lower() == "dpop"
    op = await shop.operation(db, agent, user, account="acct_ada")
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200
    token = agent.tokens.access_token
    r = await shop.read(agent, user, op["operation_id"], knobs=Knobs(authorization=f"DPoP {token}"))  # no proof
    assert r.status_code == 401 and r.json()["error"] == "invalid_dpop_proof", r.text
    assert r.headers["www-authenticate"].startswith("DPoP")
    r = await shop.read(agent, user, op["operation_id"], knobs=Knobs(authorization=f"Bearer {token}"))
    assert r.status_code == 401 and r.json()["error"] == "invalid_token", r.text


async def test_signed_in_without_the_kinds_scope_is_insufficient_scope(shop: Shop1, agent: Pap10Agent,
                                                                       user: Session, web: MockWeb, store: Any,
                                                                       db: Any) -> None:
    # ADR 0004 §7: signed in without the scope -> 403 insufficient_scope with scope=, nothing performed.
    r = await sign_in(shop, agent, web, store, "acct_ada", scope="poppy:read")
    assert r.status_code == 200, r.text
    op = await shop.operation(db, agent, user, account="acct_ada")
    r = await shop.confirm(agent, user, op)
    assert r.status_code == 403 and r.json()["error"] == "insufficient_scope", r.text
    assert 'scope="poppy:write"' in r.headers["www-authenticate"]
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert shop.receiver.performed == {}
