"""The ``Poppy-Session`` header and its delegation, rule by rule, at a 1.0 resource: the
ledger's operations endpoint (ADR 0004 §3, §7, §9).

Each test changes one thing of an otherwise valid request from the independent agent and
expects the answer of [S §4]: ``400 {"error":"invalid_session"}``, no challenge, nothing
echoed, the operation untouched. The baseline test proves the same request passes unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.pap10.conftest import Shop1, new_agent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import DAY, DROP, EcKey, Knobs, Pap10Agent, RsaKey, Session, compact


def assert_invalid_session(r: Any, code: str = "invalid_session") -> None:
    """[S §4]: 400, the code, no OAuth challenge, no JWT echoed."""
    assert r.status_code == 400, r.text
    assert r.json()["error"] == code, r.text
    assert "www-authenticate" not in r.headers
    assert r.headers["cache-control"] == "no-store"
    assert "eyJ" not in r.text


async def test_a_valid_signed_out_request_reads_the_callers_operation(shop: Shop1, agent: Pap10Agent, user: Session,
                                                                      db: Any) -> None:
    # [S §3] a new sid starts a signed-out Session; ADR 0004 §9: owner is (client_id, sub).
    op = await shop.operation(db, agent, user)
    r = await shop.read(agent, user, op["operation_id"])
    assert r.status_code == 200, r.text
    assert r.json()["operation_id"] == op["operation_id"] and r.json()["state"] == "proposed"


@pytest.mark.parametrize(("case", "knobs"), [
    # [S §3] header: typ poppy-session+jwt
    ("typ", Knobs(header={"typ": "JWT"})),
    ("typ missing", Knobs(header={"typ": DROP})),
    # ADR 0004 §3 step 2 [Q13]: ES256 only
    ("alg", Knobs(header={"alg": "ES384"})),
    ("alg none", Knobs(header={"alg": "none"})),
    # [S §3] kid = RFC 7638 thumbprint of the delegated key
    ("kid", Knobs(header={"kid": "not-the-thumbprint"})),
    # ADR 0004 §3 step 2: embedded keys are refused
    ("jwk in header", Knobs(header={"jwk": EcKey().public_jwk()})),
    # [S §3] poppy_dlg required
    ("no delegation", Knobs(header={"poppy_dlg": DROP})),
    # [S §3] the identity key signs the delegation, never the Session JWT
    ("identity key signs directly", Knobs(sign_with_identity=True)),
    # [S §2, §3] aud: the company identifier, exactly (no trailing-slash normalisation, ADR 0004 §2)
    ("aud trailing slash", Knobs(claims={"aud": "__issuer__/"})),
    ("aud list", Knobs(claims={"aud": ["__issuer__"]})),
    # [S §3] htm, htu (RFC 9449, without query or fragment)
    ("htm", Knobs(claims={"htm": "POST"})),
    ("htu other path", Knobs(claims={"htu": "https://ledger.frontdoor.test/elsewhere"})),
    ("htu other host", Knobs(claims={"htu": "https://evil.example/x"})),
    # [S §3] iat fresh: ±60 s (ADR 0004 §3 step 6 [Q2])
    ("stale iat", Knobs(iat_offset=-120)),
    ("future iat", Knobs(iat_offset=120)),
    # ADR 0004 §3 step 6: exp, if present, not passed
    ("exp passed", Knobs(claims={"exp": 1})),
    # [S §3] ath forbidden without an access token
    ("ath without token", Knobs(ath="x" * 43)),
    # [S §3] sid/sub syntax [Q14]; jti required
    ("sid syntax", Knobs(claims={"sid": "has space"})),
    ("sub missing", Knobs(claims={"sub": DROP})),
    ("jti missing", Knobs(claims={"jti": DROP})),
    # [S §3] iss = the exact client_id
    # (a published agent's client_id: its keys load, but they never signed this delegation)
    ("iss other client", Knobs(claims={"iss": "__other_agent__"})),
])
async def test_a_malformed_session_jwt_is_invalid_session(shop: Shop1, agent: Pap10Agent, user: Session, db: Any,
                                                          web: MockWeb, clock: ShiftableClock, case: str,
                                                          knobs: Knobs) -> None:
    op = await shop.operation(db, agent, user)
    other = new_agent(web, clock).client_id
    claims = {k: (shop.tenant.issuer + "/" if v == "__issuer__/" else [shop.tenant.issuer] if v == ["__issuer__"]
                  else other if v == "__other_agent__" else v) for k, v in knobs.claims.items()}
    bad = Knobs(header=knobs.header, claims=claims, sign_with_identity=knobs.sign_with_identity,
                iat_offset=knobs.iat_offset, ath=knobs.ath)
    r = await shop.read(agent, user, op["operation_id"], knobs=bad)
    assert_invalid_session(r)
    # The same agent and Session, well-formed, still pass: nothing was changed by the refusal.
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200, case


async def test_two_poppy_session_headers_are_refused(shop: Shop1, agent: Pap10Agent, user: Session, db: Any) -> None:
    # ADR 0004 §3 step 1: exactly one header.
    op = await shop.operation(db, agent, user)
    assert_invalid_session(await shop.read(agent, user, op["operation_id"], knobs=Knobs(twice=True)))


async def test_a_replayed_session_jwt_is_refused(shop: Shop1, agent: Pap10Agent, user: Session, db: Any) -> None:
    # ADR 0004 §3 [Q12]: a jti is accepted once; agents sign a new JWT for every retry.
    op = await shop.operation(db, agent, user)
    url = shop.url(op["operation_id"])
    headers = agent.request_headers(user, aud=shop.tenant.issuer, method="GET", url=url)
    assert (await shop.ledger.get(url, headers=headers)).status_code == 200
    assert_invalid_session(await shop.ledger.get(url, headers=headers))


@pytest.mark.parametrize(("case", "lifetime", "iat_shift"), [
    ("25 h", 25 * 3600, 0),            # [S §3] exp at most 24 hours after iat
    ("expired", 600, -3600),           # [S §3] delegation expiry
    ("issued in the future", 600, 600),  # ADR 0004 §3 step 4: iat not in the future (60 s skew)
])
async def test_a_delegation_out_of_its_lifetime_is_refused(shop: Shop1, agent: Pap10Agent, user: Session, db: Any,
                                                           case: str, lifetime: int, iat_shift: int) -> None:
    op = await shop.operation(db, agent, user)
    agent.delegation = agent.mint_delegation(lifetime=lifetime, iat=agent.clock() + iat_shift)
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]))


async def test_a_delegation_of_exactly_24_hours_is_accepted(shop: Shop1, agent: Pap10Agent, user: Session,
                                                            db: Any) -> None:
    op = await shop.operation(db, agent, user)
    agent.delegation = agent.mint_delegation(lifetime=DAY)
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


@pytest.mark.parametrize(("case", "header", "claims"), [
    ("typ", {"typ": "JWT"}, {}),                                   # [S §3] typ poppy-delegation+jwt
    ("alg not of the key", {"alg": "PS384"}, {}),                  # ADR 0004 §3 step 4: kid's key fits alg
    ("unknown kid", {"kid": "no-such-key"}, {}),                   # reload once, still unknown
    ("iss other client", {}, {"iss": "https://other.example/agent.json"}),
    ("no cnf", {}, {"cnf": DROP}),
    ("no jti", {}, {"jti": DROP}),
    ("no exp", {}, {"exp": DROP}),
    # [S §3] no User ID, Company identifier or Agent ID in a delegation (ADR 0004 §3 step 4 [Q5])
    ("sub", {}, {"sub": "someone"}),
    ("aud", {}, {"aud": "__issuer__"}),
    ("agent_id", {}, {"agent_id": "a-1"}),
])
async def test_a_malformed_delegation_is_refused(shop: Shop1, agent: Pap10Agent, user: Session, db: Any,
                                                 case: str, header: dict[str, Any], claims: dict[str, Any]) -> None:
    op = await shop.operation(db, agent, user)
    claims = {k: shop.tenant.issuer if v == "__issuer__" else v for k, v in claims.items()}
    agent.delegation = agent.mint_delegation(header=header, claims=claims)
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]))


async def test_a_delegation_cnf_with_a_private_key_is_refused(shop: Shop1, agent: Pap10Agent, user: Session,
                                                              db: Any) -> None:
    # [S §3] cnf.jwk: the public delegated key, no private members.
    op = await shop.operation(db, agent, user)
    agent.delegation = agent.mint_delegation(claims={"cnf": {"jwk": agent.delegated.private_jwk()}})
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]))


async def test_a_delegation_signed_by_a_key_not_in_the_jwks_is_refused(shop: Shop1, agent: Pap10Agent,
                                                                       user: Session, db: Any) -> None:
    # [S §3] the delegation signature is by one of the CIMD's identity keys.
    op = await shop.operation(db, agent, user)
    stranger = EcKey()
    agent.delegation = agent.mint_delegation(signer=stranger, header={"kid": agent.identity.thumbprint()})
    assert_invalid_session(await shop.read(agent, user, op["operation_id"]))


async def test_a_ps384_delegation_is_accepted(shop: Shop1, web: MockWeb, clock: ShiftableClock, user: Session,
                                              db: Any) -> None:
    # [S §3] delegation alg ES256 (required) or PS384 (recommended).
    agent = new_agent(web, clock, identity=RsaKey())
    op = await shop.operation(db, agent, user)
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200


async def test_a_session_jwt_signed_by_another_delegated_key_is_refused(shop: Shop1, agent: Pap10Agent,
                                                                        user: Session, db: Any) -> None:
    # [S §3] the Session JWT signature is by cnf.jwk (kid naming another key's thumbprint fails too).
    op = await shop.operation(db, agent, user)
    url = shop.url(op["operation_id"])
    other = EcKey()
    good = agent.session_jwt(user, aud=shop.tenant.issuer, method="GET", url=url)
    header_b64, payload_b64, _ = good.split(".")
    import base64
    import json

    header = json.loads(base64.urlsafe_b64decode(header_b64 + "=" * (-len(header_b64) % 4)))
    claims = json.loads(base64.urlsafe_b64decode(payload_b64 + "=" * (-len(payload_b64) % 4)))
    forged = compact(header, {**claims, "jti": claims["jti"] + "x"}, other)
    assert_invalid_session(await shop.ledger.get(url, headers={"Poppy-Session": forged}))
