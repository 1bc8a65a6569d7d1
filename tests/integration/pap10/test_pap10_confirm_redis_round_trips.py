"""How many Redis round trips a PAP 1.0 caller's confirm costs at the ledger (issue #13 §4), pinned.

Counted at the socket as in ``tests/integration/ledger/test_confirm_redis_round_trips.py``.
A request with a DPoP-bound access token carries two one-time values, the ``Poppy-Session``
JWT's ``jti`` (ADR 0004 §3 [Q12]) and the DPoP proof's (RFC 9449 §11.1). Both are claimed in
one pipeline of ``SET NX``, and a request where either was seen before is refused. Then the
per-Session count runs as its own script, because its ``ses_`` ID is read from PostgreSQL
first. Last comes the settled outcome's ``PUBLISH``.
"""

from __future__ import annotations

from typing import Any

from tests.integration.ledger.test_confirm_redis_round_trips import round_trips
from tests.integration.pap10.conftest import Shop1, new_agent
from tests.integration.pap10.test_pap10_session_header import assert_invalid_session
from tests.integration.pap10.test_pap10_signed_in import signed_in
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import POPPY_SESSION, Session


async def test_a_dpop_bound_1_0_confirm_claims_both_values_in_one_round_trip(
        shop: Shop1, web: MockWeb, clock: ShiftableClock, user: Session, store: Any, db: Any) -> None:
    agent = new_agent(web, clock, dpop_tokens=True)
    await signed_in(shop, agent, web, store)
    assert agent.tokens is not None and agent.tokens.token_type.lower() == "dpop"
    warm = await shop.operation(db, agent, user, account="acct_ada")  # the scripts loaded into Redis
    assert (await shop.confirm(agent, user, warm)).status_code == 200
    op = await shop.operation(db, agent, user, account="acct_ada")
    with round_trips() as sent:
        r = await shop.confirm(agent, user, op)
    assert r.status_code == 200 and r.json()["state"] == "succeeded", r.text
    assert shop.receiver.performed[op["operation_id"]] == 1
    assert sent == [["EVALSHA"], ["SET", "SET"], ["EVALSHA"], ["PUBLISH"]], sent


async def test_a_replayed_proof_or_session_jwt_is_refused_from_the_one_pipeline(
        shop: Shop1, web: MockWeb, clock: ShiftableClock, user: Session, store: Any, db: Any) -> None:
    agent = new_agent(web, clock, dpop_tokens=True)
    await signed_in(shop, agent, web, store)
    op = await shop.operation(db, agent, user, account="acct_ada")
    url = shop.url(op["operation_id"])
    headers = agent.request_headers(user, aud=shop.tenant.issuer, method="GET", url=url)
    assert (await shop.ledger.get(url, headers=headers)).status_code == 200
    # The same request again: both values were seen.
    with round_trips() as sent:
        assert_invalid_session(await shop.ledger.get(url, headers=headers))
    assert sent == [["EVALSHA"], ["SET", "SET"]], sent
    # A fresh Session JWT around the used DPoP proof: the proof's claim refuses it.
    fresh = dict(agent.request_headers(user, aud=shop.tenant.issuer, method="GET", url=url))
    reused = [(POPPY_SESSION, fresh[POPPY_SESSION]), *[(k, v) for k, v in headers if k != POPPY_SESSION]]
    assert_invalid_session(await shop.ledger.get(url, headers=reused))
    # A fresh proof around the used Session JWT: the Session JWT's claim refuses it.
    reused = [(k, fresh["DPoP"] if k == "DPoP" else v) for k, v in headers]
    assert_invalid_session(await shop.ledger.get(url, headers=reused))
    # Fresh both: served.
    assert (await shop.read(agent, user, op["operation_id"])).status_code == 200
