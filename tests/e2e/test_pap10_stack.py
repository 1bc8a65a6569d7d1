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

import queue
import subprocess
import sys
import threading
import time

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
from tests.support.pap10_agent import Pap10Agent, Session, SignInError, discover

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


async def test_the_independent_agent_at_northwind_signs_in_and_confirms_an_operation(
        stack: Stack) -> None:  # noqa: F811
    """At the company (the sdk on Northwind): signed out, Device Sign-In in a browser, a
    confirmed reorder performed by Frontdoor's ledger [S §3, §5]; ADR 0004 §9."""
    agent = Pap10Agent(name="E2E 1.0 Agent")
    with agent.serve():
        async with httpx.AsyncClient(timeout=10) as http:
            found = await discover(http, stack.northwind, versions=("1.0", "0.2"), loopback_dev=True)
            user = Session(sub=unique("e2e-"))
            orders = f"{stack.northwind}/api/orders"
            r, user = await agent.call(http, "GET", orders, user, aud=found.company_id)
            assert r.status_code == 401 and r.json()["error"] == "sign_in_required", r.text
            device = await agent.start_device(http, found, "orders:read")
            done = Browser().approve_device(device["verification_uri_complete"], "ada@northwind.example",
                                            northwind_password(stack))
            assert done.status_code == 200 and "connected" in done.text, done.text[:300]
            deadline = time.monotonic() + 60
            while True:
                time.sleep(device["interval"] + 0.5)
                r = await agent.poll_device(http, found, device["device_code"])
                if r.status_code == 200 or r.json()["error"] not in ("authorization_pending", "slow_down"):
                    break
                assert time.monotonic() < deadline
            assert r.status_code == 200, r.text
            r, user = await agent.call(http, "GET", orders, user, aud=found.company_id)
            assert r.status_code == 200, r.text
            r, user = await agent.call(http, "POST", f"{stack.northwind}/api/orders/reorder", user,
                                       aud=found.company_id, json_body={})
            assert r.status_code == 202, r.text
            op = r.json()["operation"]
            url = f"{found.operations_endpoint}/{op['operation_id']}"
            r, user = await agent.call(http, "POST", f"{url}/confirm", user, aud=found.company_id,
                                       json_body={"revision": op["revision"], "approved_by": "user"})
            assert r.status_code == 200, r.text
            state, deadline = r.json()["state"], time.monotonic() + 30
            while state == "in_progress" and time.monotonic() < deadline:
                time.sleep(1)
                r, user = await agent.call(http, "GET", url, user, aud=found.company_id)
                state = r.json()["state"]
            assert state == "succeeded", r.text
def test_play_agent_profile_1_0_end_to_end(stack: Stack) -> None:  # noqa: F811
    """``scripts/play_agent.py --profile 1.0`` (issue #11): discovery, signed out, device sign-in, a
    confirmed reorder, sign-out, and session_ended recovery with a new sid."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "play_agent.py"), "--profile", "1.0",
                             "--company", stack.northwind, "--reorder", "--yes", "--any-version",
                             "--console", stack.console, "--api-key", demo_credentials(stack)["api_key"]],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out: list[str] = []
    q: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, q, out), daemon=True).start()

    def wait_for(text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = q.get(timeout=0.5)
            except queue.Empty:
                line = ""
            if text in line:
                return line
            assert proc.poll() is None or not q.empty(), "".join(out)
            assert time.monotonic() < deadline, "".join(out)

    try:
        assert "sign_in_required" in wait_for("GET /api/orders signed out ->")
        link = wait_for("/device?user_code=").strip()
        done = Browser().approve_device(link, "ada@northwind.example", northwind_password(stack))
        assert "connected" in done.text
        assert "Outcome: succeeded" in wait_for("Outcome:")
        assert "invalid_token" in wait_for("with the old access token ->")
        assert "session_ended" in wait_for("-> 400 session_ended")
        assert proc.wait(timeout=60) == 0, "".join(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(out)
    assert "eyJ" not in text  # no JWT or token is ever printed



async def test_the_independent_agent_signs_in_by_direct_sign_in(stack: Stack) -> None:  # noqa: F811
    """Direct Sign-In under 1.0 [S §5]: PKCE S256, ``state`` and the RFC 9207 ``iss`` checked
    before the code is redeemed at the token endpoint without a ``session_id``."""
    agent = Pap10Agent(name="E2E 1.0 Direct Agent")
    with agent.serve():
        async with httpx.AsyncClient(timeout=10) as http:
            found = await discover(http, stack.northwind, versions=("1.0", "0.2"), loopback_dev=True)
            pending = agent.authorize(found, "orders:read")
            done = Browser().approve_direct(pending.url, "ada@northwind.example", northwind_password(stack))
            assert "Back at the agent" in done.text, done.text[:300]
            returned = agent.callbacks[-1]
            assert returned["iss"] == found.issuer and returned["state"] == pending.state
            with pytest.raises(SignInError) as forged:  # a redirect that is not ours is never redeemed
                await agent.redeem(http, found, pending, {**returned, "state": "another"})
            assert forged.value.code == "state"
            r = await agent.redeem(http, found, pending, returned)
            assert r.status_code == 200, r.text
            assert "session_id" not in r.json()
            r, _ = await agent.call(http, "GET", f"{stack.northwind}/api/orders", Session(sub=unique("e2e-")),
                                    aud=found.company_id)
            assert r.status_code == 200, r.text
