"""Authentication of management API calls and shared helpers."""

from __future__ import annotations

from typing import Any

from frontdoor_core.errors import RateLimited, Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.roles import require
from litestar import Request
from litestar.datastructures import State
from litestar.exceptions import NotAuthorizedException

from ..access import authenticate_api_key
from ..context import ConsoleContext

__all__ = ["ctx_of", "provide_actor", "rate_limit", "require_writer"]


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
