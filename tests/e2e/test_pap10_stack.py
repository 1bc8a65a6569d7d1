"""PAP 1.0 over real sockets against the stack ``make run`` starts (ADR 0004).

Two agents that share nothing with Frontdoor's code play the 1.0 side: the independent test
agent (tests/support/pap10_agent.py, its CIMD and JWKS on a loopback port) and
``scripts/play_agent.py --profile 1.0`` as a person runs it. The person approves in a
browser (Frontdoor's device page, Northwind's login page). The demo tenant serves 0.2 and
1.0 and publishes 0.2 (the default, ADR 0004 §1), so the agents are told to use a
``poppy.json`` naming 0.2; and Northwind runs on a loopback port while its documents name
``northwind.example``, so the two domain checks of [S §2] are left to the integration suite
(tests/integration/pap10/test_pap10_discovery_documents.py); every other cross-check runs.
"""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import unique
from tests.e2e.test_stack import (  # noqa: F401  (the module-scoped stack fixtures)
    ROOT,
    Browser,
    Stack,
    _pump,
    demo_auth,
    demo_credentials,
    dns_e2e,
    northwind_password,
    stack,
)
from tests.support.pap10_agent import Pap10Agent, Session, discover

pytestmark = pytest.mark.e2e


async def test_the_independent_agent_at_the_ledger_over_sockets(stack: Stack) -> None:  # noqa: F811
    """Signed out at Frontdoor's operations endpoint, a key rotation, the Session ended by the
    company, and the agent's recovery with a new ``sid`` [S §3, §4]."""
    agent = Pap10Agent(name="E2E 1.0 Agent")
    with agent.serve():
        async with httpx.AsyncClient(timeout=10) as http:
            found = await discover(http, stack.northwind, versions=("1.0", "0.2"), loopback_dev=True)
            assert found.issuer == f"{stack.issuer}/demo"
            endpoint = found.operations_endpoint
            assert endpoint == f"{stack.ledger}/demo/operations"
            unknown = f"{endpoint}/op_{'0' * 26}"
            user = Session(sub=unique("e2e-"))
            # A first request starts the Session signed out; the agent is authenticated, the operation unknown.
            r, user = await agent.call(http, "GET", unknown, user, aud=found.company_id)
            assert r.status_code == 404 and r.json()["error"] == "operation_not_found", r.text
            agent.rotate()  # [S §3] delegated keys rotate between requests
            r, user = await agent.call(http, "GET", unknown, user, aud=found.company_id)
            assert r.status_code == 404, r.text
            for action in ("block", "unblock"):  # the company ends the agent's Sessions
                r = httpx.post(f"{stack.console}/api/v1/agents/{action}", json={"client_id": agent.client_id},
                               headers=demo_auth(stack))
                assert r.status_code == 200, r.text
            ended, _ = await agent.call(http, "GET", unknown, user, aud=found.company_id, recover=False)
            assert ended.status_code == 400 and ended.json() == {
                "error": "session_ended", "error_description": "The Session has ended: start a new one."}
            before = user.sid
            r, user = await agent.call(http, "GET", unknown, user, aud=found.company_id)
            assert user.sid != before and r.status_code == 404, r.text
