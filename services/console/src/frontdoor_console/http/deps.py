"""Authentication of management API calls and shared helpers."""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import RateLimited, Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_core.redis_keys import shard
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.roles import require
from litestar import Request
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException

from ..access import authenticate_api_key
from ..context import ConsoleContext

__all__ = ["ctx_of", "provide_actor", "rate_limit", "require_writer", "tenant_quota"]


def ctx_of(state: State) -> ConsoleContext:
    ctx: ConsoleContext = state.ctx
    return ctx


async def provide_actor(request: Request[Any, Any, Any]) -> Actor:
    """The caller of a management API route, from ``Authorization: Bearer <api key>``."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise NotAuthorizedException("Send your API key as 'Authorization: Bearer <api key>'.")
    actor = await authenticate_api_key(request)
    if actor is None:
        raise NotAuthorizedException("The API key is not valid (unknown, malformed or revoked).")
    import structlog

    structlog.contextvars.bind_contextvars(tenant_id=actor.tenant_id)
    return actor


def require_writer(actor: Actor) -> None:
    """Viewers read; only owners and admins change anything.

    The app-wide role guard (`frontdoor_console.access`) already refused the request;
    handlers call this too so the rule holds if a route is ever mounted without it.
    """
    require(actor, "write")


async def rate_limit(ctx: ConsoleContext, key: str, *, limit: int, window_s: int) -> None:
    """Count one attempt; 429 past the limit; 503 when Redis is unreachable (fail closed)."""
    try:
        allowed, retry = await hit(ctx.redis, key, limit=limit, window_s=window_s)
    except Exception:
        raise Unavailable("rate_limiter_unavailable", "Try again in a moment.", retry_after=5) from None
    if not allowed:
        raise RateLimited("rate_limited", "Too many attempts; wait and retry.", retry_after=retry)


# Per-tenant fairness for the webhook actions that make work for the workers: which
# setting caps each, over which window (seconds).
_QUOTAS = {
    "webhook_test": ("webhook_test_rate_limit", 60),
    "webhook_redelivery": ("webhook_redelivery_rate_limit", 60),
    "webhook_recovery": ("webhook_recovery_rate_limit", 3600),
}


async def tenant_quota(ctx: ConsoleContext, tenant_id: str, action: str) -> None:
    """Count one ``action`` of the tenant (API and dashboard share the counter); 429 past its limit.

    Raises:
        RateLimited: ``rate_limited`` with ``retry_after`` (the seconds left in the window).
        Unavailable: Redis is unreachable (fail closed).
    """
    setting, window_s = _QUOTAS[action]
    await rate_limit(ctx, f"quota:{action}:{shard(tenant_id)}", limit=getattr(ctx.settings, setting), window_s=window_s)
