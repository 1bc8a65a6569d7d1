"""Protected-resource metadata, challenges, scope checks, the caches and nonces."""

from __future__ import annotations

from datetime import timedelta

import pytest
from frontdoor_protocol import ErrorCode, ProtocolError
from frontdoor_sdk import (
    Caller,
    InMemoryReplayCache,
    RotatingDPoPNonces,
    called_tool_scopes,
    check_scopes,
    mcp_challenge,
    protected_resource_metadata,
    protected_resource_metadata_url,
    refusal,
)

from .kit import ISSUER, MCP_URL, Clock


def _caller(signed_in: bool, *scopes: str) -> Caller:
    return Caller(
        client_id="https://agent.example/c",
        user_id="usr_1",
        session_id="ses_1",
        signed_in=signed_in,
        account="acct" if signed_in else None,
        scopes=frozenset(scopes),
        token_type="DPoP",
    )


def test_rfc9728_3_1_metadata_url() -> None:
    """RFC 9728 §3.1: the well-known path goes before the resource's path."""
    assert protected_resource_metadata_url(MCP_URL) == "https://shop.example/.well-known/oauth-protected-resource/mcp"
    assert protected_resource_metadata_url("https://shop.example/") == (
        "https://shop.example/.well-known/oauth-protected-resource"
    )
    for bad in ("shop.example/mcp", "https://shop.example/mcp?x=1", "https://shop.example/mcp#f"):
        with pytest.raises(ValueError):
            protected_resource_metadata_url(bad)


def test_rfc9728_2_metadata_document() -> None:
    """PAP-6-06: authorization_servers has the issuer; PAP-4.3-26: ES256 when DPoP is supported."""
    dpop = protected_resource_metadata(MCP_URL, ISSUER, scopes=["orders:read"], resource_name="Northwind MCP")
    assert dpop == {
        "resource": MCP_URL,
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["orders:read"],
        "dpop_signing_alg_values_supported": ["ES256"],
        "dpop_bound_access_tokens_required": True,
        "resource_name": "Northwind MCP",
    }
    bearer = protected_resource_metadata(MCP_URL, ISSUER, dpop_bound=False)
    assert "dpop_signing_alg_values_supported" not in bearer
    assert bearer["dpop_bound_access_tokens_required"] is False
    with pytest.raises(ValueError):
        protected_resource_metadata(MCP_URL, ISSUER, scopes=["bad scope"])


def test_mcp_challenge() -> None:
    """RFC 9728 §5.1: resource_metadata in each scheme's challenge."""
    url = protected_resource_metadata_url(MCP_URL)
    assert mcp_challenge(MCP_URL, dpop=False) == f'Bearer resource_metadata="{url}"'
    error = ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, scope="orders:read")
    assert mcp_challenge(MCP_URL, error) == (
        f'Bearer error="insufficient_scope", scope="orders:read", resource_metadata="{url}", '
        f'DPoP error="insufficient_scope", scope="orders:read", algs="ES256", resource_metadata="{url}"'
    )


def test_check_scopes() -> None:
    """sign_in_required when signed out, insufficient_scope when a scope is missing, both with scope=."""
    assert check_scopes(_caller(False), ()) is None
    signed_out = check_scopes(_caller(False), ["orders:read"])
    assert signed_out is not None and (signed_out.code, signed_out.scope) == (ErrorCode.SIGN_IN_REQUIRED, "orders:read")
    missing = check_scopes(_caller(True, "poppy:read"), ["orders:read", "orders:read"])
    assert missing is not None and (missing.code, missing.scope) == (ErrorCode.INSUFFICIENT_SCOPE, "orders:read")
    assert check_scopes(_caller(True, "orders:read", "x"), ["orders:read"]) is None


def test_refusal_headers() -> None:
    """use_dpop_nonce carries DPoP-Nonce; 503 carries Retry-After; neither without its value is possible."""
    nonce = refusal(ProtocolError(ErrorCode.USE_DPOP_NONCE), dpop_nonce="n1")
    assert (nonce.status, nonce.headers["DPoP-Nonce"]) == (401, "n1")
    with pytest.raises(ValueError):
        refusal(ProtocolError(ErrorCode.USE_DPOP_NONCE))
    down = refusal(ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE), retry_after="3")
    assert (down.status, down.headers["Retry-After"], down.body) == (503, "3", {"error": "temporarily_unavailable"})


def test_called_tool_scopes() -> None:
    """tools/call names its tool; batches add up; anything else needs nothing extra."""
    scopes = {"list_orders": ("orders:read",), "cancel": ("orders:write", "orders:read")}
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cancel"}}'
    assert called_tool_scopes(call, scopes) == ("orders:write", "orders:read")
    batch = b'[{"method":"tools/call","params":{"name":"list_orders"}},{"method":"tools/call","params":{"name":"x"}}]'
    assert called_tool_scopes(batch, scopes) == ("orders:read",)
    for other in (b'{"method":"tools/list"}', b"not json", b'{"method":"tools/call","params":[]}'):
        assert called_tool_scopes(other, scopes) == ()


async def test_in_memory_replay_cache() -> None:
    """Once per key while it is remembered; bounded; forgotten after its time."""
    clock = Clock()
    cache = InMemoryReplayCache(max_entries=2, clock=clock)
    now = int(clock().timestamp())
    assert await cache.first_use("a", until=now + 60)
    assert not await cache.first_use("a", until=now + 60)
    assert await cache.first_use("b", until=now + 60) and await cache.first_use("c", until=now + 60)
    assert len(cache) == 2  # "a", the oldest, was dropped
    clock.advance(61)
    assert await cache.first_use("b", until=now + 121)


def test_rotating_nonces() -> None:
    """A nonce is accepted in its window and the next; replicas with one secret agree."""
    clock = Clock()
    secret = b"s" * 32
    nonces = RotatingDPoPNonces(secret, period=60, clock=clock)
    first = nonces.current()
    assert first == RotatingDPoPNonces(secret, period=60, clock=clock).current()
    clock.now += timedelta(seconds=60)
    assert first in nonces.accepted() and nonces.current() != first
    clock.now += timedelta(seconds=60)
    assert first not in nonces.accepted()
    assert "s" * 8 not in repr(nonces)
    with pytest.raises(ValueError):
        RotatingDPoPNonces(b"short")
