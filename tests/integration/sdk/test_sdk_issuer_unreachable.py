"""The sdk's middleware while the issuer cannot be reached, over a real refused connection.

A company's API keeps answering a request without credentials with the 401 challenge
(RFC 6750 §3.1, RFC 9449 §7.1: ``WWW-Authenticate: DPoP algs="ES256"``), which needs no
key; a request with a real Session Token fails closed with 503 and ``Retry-After``.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
from frontdoor_sdk import FrontdoorMiddleware, FrontdoorVerifier
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb

PUBLIC = "https://shop.example"
API_URL = f"{PUBLIC}/api/orders"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on exit: connecting is refused


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"orders":[]}'})


async def test_no_credentials_get_the_challenge_while_the_issuer_is_unreachable(
    console: AsyncTestClient[Any], issuer: AsyncTestClient[Any], tenant: TenantHandle, web: MockWeb,
) -> None:
    agent = TestAgent(host=f"{unique('agent-')}.example").publish(web)
    r = await console.post("/api/v1/resource-credentials", json={"name": "sdk"}, headers=tenant.auth)
    assert r.status_code == 201, r.text
    secret = str(r.json()["secret"])
    r = await issuer.post(f"/{tenant.slug}/oauth/token", data=agent.token_form(tenant.issuer, "u1"),
                          headers={"DPoP": agent.dpop("POST", f"{tenant.issuer}/oauth/token")})
    assert r.status_code == 200, r.text
    token = str(r.json()["access_token"])

    # Every request to the issuer goes through a proxy port nobody listens on: refused.
    down = httpx.AsyncHTTPTransport(proxy=f"http://127.0.0.1:{_closed_port()}")
    async with httpx.AsyncClient(mounts={"all://": down}, timeout=2) as http:
        verifier = FrontdoorVerifier(tenant.issuer, secret, http=http)
        protected = FrontdoorMiddleware(_app, verifier, protect={"/api": ["orders:read"]}, public_url=PUBLIC)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=protected), base_url=PUBLIC) as company:
            bare = await company.get("/api/orders")
            assert bare.status_code == 401, bare.text
            assert bare.headers["www-authenticate"] == 'DPoP algs="ES256"'
            assert json.loads(bare.content)["error"] == "invalid_token"

            real = await company.get("/api/orders", headers={
                "Authorization": f"DPoP {token}", "DPoP": agent.dpop("GET", API_URL, token=token)})
            assert real.status_code == 503, real.text
            assert json.loads(real.content)["error"] == "temporarily_unavailable"
            assert real.headers["retry-after"]
            assert token[-24:] not in real.text
