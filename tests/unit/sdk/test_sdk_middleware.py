"""FrontdoorMiddleware around a tiny ASGI app, driven over httpx's ASGI transport.

The app is reached at an internal address (``http://internal:8000``) while agents sign
their proofs for the public URL (``https://shop.example``): the middleware must check
proofs against the configured public URL, not the Host header.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from frontdoor_sdk import FrontdoorMiddleware, FrontdoorVerifier, Requirement, caller_of

from .kit import API_URL, CREDENTIAL, ISSUER, MCP_URL, PUBLIC, Agent, Clock, FakeFrontdoor

INTERNAL = "http://internal:8000"


class App:
    """Echoes the caller and the body it received; records whether it was called."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        caller = caller_of(scope)
        payload = json.dumps(
            {
                "user": caller.user_id if caller else None,
                "signed_in": caller.signed_in if caller else None,
                "body": body.decode(),
            }
        ).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
def frontdoor() -> FakeFrontdoor:
    return FakeFrontdoor()


@pytest.fixture
async def verifier(frontdoor: FakeFrontdoor) -> AsyncIterator[FrontdoorVerifier]:
    async with frontdoor.client() as http:
        yield FrontdoorVerifier(ISSUER, CREDENTIAL, http=http, clock=Clock())


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=INTERNAL)


PROTECT = {
    "/api": Requirement(),
    "/api/orders": ["orders:read"],
    "/mcp": Requirement(resource_url=MCP_URL, tool_scopes={"list_orders": ("orders:read",)}),
}


async def test_public_paths_pass_untouched(verifier: FrontdoorVerifier) -> None:
    """Paths no prefix covers need no token; "/apix" is not under "/api"."""
    app = App()
    async with _client(FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)) as client:
        for path in ("/", "/apix", "/.well-known/poppy.json"):
            response = await client.get(path)
            assert response.status_code == 200 and response.json()["user"] is None
    assert app.calls == 3


async def test_a_protected_request_reaches_the_app_with_its_caller(
    verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor
) -> None:
    """The proof names the public URL; the app behind a proxy still accepts it."""
    agent = Agent()
    token = frontdoor.mint(agent, signed_in=True, account="acct_1", scope="orders:read")
    app = App()
    async with _client(FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)) as client:
        response = await client.get("/api/orders?page=2", headers=agent.headers("GET", API_URL, token))
    assert response.status_code == 200, response.text
    assert response.json()["user"] == agent.user_id


async def test_the_host_header_is_not_trusted_by_default(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """A proof made for the internal address (what Host says) is refused: htu is the public URL."""
    agent = Agent()
    token = frontdoor.mint(agent)
    app = App()
    async with _client(FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)) as client:
        response = await client.get("/api/products", headers=agent.headers("GET", f"{INTERNAL}/api/products", token))
    assert response.status_code == 401 and response.json()["error"] == "invalid_dpop_proof"
    assert app.calls == 0


async def test_host_mode_uses_the_host_header(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """public_url=None: the URL comes from the scope's scheme and Host (for a trusted proxy)."""
    agent = Agent()
    token = frontdoor.mint(agent)
    async with _client(FrontdoorMiddleware(App(), verifier, protect=PROTECT, public_url=None)) as client:
        response = await client.get("/api/products", headers=agent.headers("GET", f"{INTERNAL}/api/products", token))
    assert response.status_code == 200, response.text


async def test_refusals_are_answered_by_the_middleware(verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor) -> None:
    """401 with the challenge and JSON body; 403 sign_in_required with scope=; the app never runs."""
    agent = Agent()
    token = frontdoor.mint(agent)
    app = App()
    async with _client(FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)) as client:
        missing = await client.get("/api/products")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == 'DPoP algs="ES256"'
        assert missing.headers["cache-control"] == "no-store"
        assert missing.json()["error"] == "invalid_token"
        signed_out = await client.get("/api/orders", headers=agent.headers("GET", API_URL, token))
        assert signed_out.status_code == 403
        assert 'error="sign_in_required"' in signed_out.headers["www-authenticate"]
        assert 'scope="orders:read"' in signed_out.headers["www-authenticate"]
        assert token not in signed_out.text
    assert app.calls == 0


async def test_a_callable_decides_what_is_protected(verifier: FrontdoorVerifier) -> None:
    """protect may be a function from path to Requirement (None: public)."""
    app = App()

    def protect(path: str) -> Requirement | None:
        return Requirement() if path.startswith("/private") else None

    async with _client(FrontdoorMiddleware(app, verifier, protect=protect, public_url=PUBLIC)) as client:
        assert (await client.get("/open")).status_code == 200
        assert (await client.get("/private/x")).status_code == 401


async def test_mcp_tool_scopes_are_enforced_before_the_mcp_server(
    verifier: FrontdoorVerifier, frontdoor: FakeFrontdoor
) -> None:
    """PAP-6-04: tools/call of a scoped tool by a signed-out Session: 403 with both MCP challenges."""
    agent = Agent()
    token = frontdoor.mint(agent, resource=MCP_URL, bound=False)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    app = App()
    async with _client(FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)) as client:
        listing = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
        listed = await client.post("/mcp", headers=headers, content=listing)
        assert listed.status_code == 200 and listed.json()["body"] == listing.decode()  # body replayed intact
        call = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_orders","arguments":{}}}'
        refused = await client.post("/mcp", headers=headers, content=call)
        assert refused.status_code == 403 and refused.json()["error"] == "sign_in_required"
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith('Bearer error="sign_in_required"') and ", DPoP error=" in challenge
        assert challenge.count('resource_metadata="https://shop.example/.well-known/oauth-protected-resource/mcp"') == 2
        unauthenticated = await client.post("/mcp", content=listing)
        assert unauthenticated.status_code == 401
        assert unauthenticated.headers["www-authenticate"].startswith('Bearer resource_metadata="')
    assert app.calls == 1


async def test_an_oversized_mcp_body_is_refused(verifier: FrontdoorVerifier) -> None:
    """The body read to find the tool is bounded."""
    app = App()
    middleware = FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC, max_body=64)
    async with _client(middleware) as client:
        response = await client.post("/mcp", content=b"x" * 65)
    assert response.status_code == 413 and app.calls == 0


async def test_a_websocket_on_a_protected_path_is_closed(verifier: FrontdoorVerifier) -> None:
    """Protected paths take no WebSocket: closed with 1008 before the app sees it."""
    app = App()
    middleware = FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await middleware({"type": "websocket", "path": "/api/x", "headers": []}, receive, send)
    assert sent == [{"type": "websocket.close", "code": 1008}] and app.calls == 0


async def test_lifespan_passes_through(verifier: FrontdoorVerifier) -> None:
    """Non-HTTP scopes are the app's."""
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    middleware = FrontdoorMiddleware(app, verifier, protect=PROTECT, public_url=PUBLIC)
    await middleware({"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    assert seen == ["lifespan"]


def test_configuration_is_checked(verifier: FrontdoorVerifier) -> None:
    """A public URL with a query, or a prefix without '/', is refused at start-up."""
    with pytest.raises(ValueError):
        FrontdoorMiddleware(App(), verifier, protect=PROTECT, public_url="https://shop.example/?a=1")
    with pytest.raises(ValueError):
        FrontdoorMiddleware(App(), verifier, protect=PROTECT, public_url="shop.example")
    with pytest.raises(ValueError):
        FrontdoorMiddleware(App(), verifier, protect={"api": ()}, public_url=PUBLIC)
