"""The sdk's lean HTTP client against the real issuer app, served by uvicorn on a loopback port.

A second issuer app on the worker's database and Redis (the ``issuer`` fixture's runs in
its test client's own loop), answering over a real TCP socket, so the lean client's
request bytes, framing and keep-alive meet a real HTTP server (RFC 7662 §2, PAP-4.9-01).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from frontdoor_core.settings import Settings
from frontdoor_sdk._lean_http import LeanClient
from frontdoor_sdk.introspection import IntrospectionRefused, Introspector
from frontdoor_sdk.session_state import SessionStateClient
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def issuer_socket(settings: Settings, migrated: str, clock: ShiftableClock, web: MockWeb) -> AsyncIterator[str]:
    """``http://127.0.0.1:{port}``: the issuer app under uvicorn in this test's loop."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_issuer.app import create_app

    port = _free_port()
    app = create_app(settings, clock=clock, fetcher=SafeFetcher(transport=web))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the issuer did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


async def test_the_real_issuer_answers_the_lean_client(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], issuer_socket: str, tenant: TenantHandle,
    web: MockWeb,
) -> None:
    """A real Session's state over one kept-alive connection; a wrong credential is refused."""
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    r = await console.post("/api/v1/resource-credentials", json={"name": "sdk"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    secret = str(r.json()["secret"])
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u1"),
                          headers={"DPoP": agent.dpop("POST", f"{tenant.issuer}/oauth/token")})
    assert r.status_code == 200, r.text
    token = str(r.json()["access_token"])

    lean = LeanClient()
    try:
        url = f"{issuer_socket}/{tenant.slug}/oauth/introspect"
        ask = Introspector(url, secret, lean, timeout=5)
        for _ in range(3):
            state = await ask.introspect(token)
            assert (state.active, state.iss, state.client_id, state.sub) == (
                True, tenant.issuer, agent.client_id, "u1")
            assert state.token_type == "DPoP" and state.cnf is not None
        assert (await ask.introspect("not-a-token")).active is False
        assert lean.connects == 1  # every call on one kept-alive connection
        with pytest.raises(IntrospectionRefused):
            await Introspector(url, "fdrs_AAAAAAAA_" + "b" * 43, lean).introspect(token)
    finally:
        await lean.aclose()


async def test_the_real_session_state_answers_the_lean_client(
    console: AsyncTestClient[Any], issuer_socket: str, tenant: TenantHandle, web: MockWeb,
    clock: ShiftableClock,
) -> None:
    """ADR 0004 §6 over the socket: the first claim of a ``jti`` is active, the second ``replayed``."""
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    r = await console.post("/api/v1/resource-credentials", json={"name": "sdk-1.0"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    lean = LeanClient()
    try:
        states = SessionStateClient(f"{issuer_socket}/{tenant.slug}/poppy/session-state", str(r.json()["secret"]),
                                    lean)
        sid, jti, iat = unique("sid-"), unique("jti-"), int(clock().timestamp())
        first = await states.check(client_id=agent.client_id, sid=sid, sub="alice", jti=jti, iat=iat)
        assert first.state == "active" and first.session is not None and first.session.startswith("ses_")
        again = await states.check(client_id=agent.client_id, sid=sid, sub="alice", jti=jti, iat=iat)
        assert again.state == "replayed"
        assert lean.connects == 1
    finally:
        await lean.aclose()
