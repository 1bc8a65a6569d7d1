"""Where a browser is in a sign-in flow: server-side state in Redis behind a random ID.

The browser holds only the ID, in an ``HttpOnly; SameSite=Lax`` cookie scoped to the
issuer path. The state expires with the flow (10 minutes). Nothing secret is stored in
the browser, and nothing the browser sends is trusted without this record.
"""

from __future__ import annotations

import secrets
from typing import Any

import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.redis_keys import shard

__all__ = ["FLOW_TTL_S", "FlowState", "FlowStore"]

FLOW_TTL_S = 600


class FlowState(msgspec.Struct, kw_only=True):
    """One browser's sign-in in progress."""

    tenant_id: str
    kind: str  # "device" | "direct"
    client_id: str
    agent_name: str
    requested_scope: list[str]
    user_code: str | None = None
    authorize_request: dict[str, Any] | None = None
    login_jti: str | None = None
    account_id: str | None = None
    idp_session: str | None = None
    """An ``oidc`` login's `idp_session_hash` (the ID token's ``sid``), for the sign-in it completes."""
    login_via: str | None = None
    """Which login set ``account_id``: ``oidc`` or ``handoff`` (kept with the sign-in, Back-Channel Logout)."""
    attempt_id: str | None = None
    """The `sign_in_attempts` row this flow moves along (the agent funnel's stages)."""


class FlowStore:
    """Create, read, update and end flows."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client

    async def _run(self, coro: Any) -> Any:
        try:
            return await coro
        except Exception:
            raise Unavailable("flow_store_unavailable", "Temporarily unavailable; retry shortly.") from None

    async def create(self, state: FlowState) -> str:
        flow_id = secrets.token_urlsafe(24)
        await self._run(self._redis.set(f"flow:{shard(flow_id)}", msgspec.json.encode(state), ex=FLOW_TTL_S))
        return flow_id

    async def get(self, flow_id: str | None) -> FlowState | None:
        if not flow_id or len(flow_id) > 64:
            return None
        raw = await self._run(self._redis.get(f"flow:{shard(flow_id)}"))
        return None if raw is None else msgspec.json.decode(raw, type=FlowState)

    async def save(self, flow_id: str, state: FlowState) -> None:
        await self._run(self._redis.set(f"flow:{shard(flow_id)}", msgspec.json.encode(state), ex=FLOW_TTL_S, xx=True))

    async def end(self, flow_id: str) -> None:
        await self._run(self._redis.delete(f"flow:{shard(flow_id)}"))
