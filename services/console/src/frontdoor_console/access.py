"""Role enforcement for every route of the console, in one place.

An app-wide Litestar guard asks `frontdoor_tenancy.roles.can` before any handler runs.
What a route needs comes from its ``opt["permission"]``; a route that says nothing needs
``read`` for GET/HEAD/OPTIONS and ``write`` for any other method. So a route added later
(by anyone) refuses viewers by default, and nothing can change state without passing
here. Routes that act before anyone is signed in (sign-in, sign-up, accepting an
invitation) or only on the caller's own account (sign-out, password change) say
``opt={"permission": "public"}`` and authenticate themselves.

The guard authenticates the caller (management API key, or the dashboard's session
cookie) and leaves the result on the request for the handler's dependencies, so each
request is authenticated once. When nobody is authenticated the guard lets the request
through: the handler's own authentication answers (401 for the API, the sign-in page for
the dashboard).
"""

from __future__ import annotations

from typing import Any, Literal

from frontdoor_core.errors import Forbidden
from frontdoor_httpkit import current_request_id
from frontdoor_tenancy import admins, api_keys
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.roles import Permission, can
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

__all__ = [
    "ADMIN_SESSION",
    "API_ACTOR",
    "PUBLIC",
    "SAFE_METHODS",
    "authenticate_api_key",
    "authenticate_cookie",
    "needs",
    "opt",
    "role_guard",
]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC: Literal["public"] = "public"
COOKIE = "fd_session"
# Keys on the request's state where the guard leaves who it authenticated.
API_ACTOR = "frontdoor.api_actor"
ADMIN_SESSION = "frontdoor.admin_session"

RouteNeed = Permission | Literal["public"]


def opt(permission: RouteNeed) -> dict[str, Any]:
    """The ``opt`` of a route handler that needs ``permission`` (or is ``public``)."""
    return {"permission": permission}


def needs(method: str, handler_opt: dict[str, Any]) -> RouteNeed:
    """What a request with ``method`` to a handler with ``handler_opt`` needs."""
    declared = handler_opt.get("permission")
    if declared is not None:
        return declared  # type: ignore[no-any-return]
    return "read" if method.upper() in SAFE_METHODS else "write"


async def authenticate_api_key(connection: ASGIConnection[Any, Any, Any, Any]) -> Actor | None:
    """The actor of ``Authorization: Bearer <api key>``, once per request; None if absent or invalid."""
    state = connection.scope.setdefault("state", {})
    if API_ACTOR in state:
        return state[API_ACTOR]  # type: ignore[no-any-return]
    scheme, _, value = connection.headers.get("authorization", "").partition(" ")
    actor = None
    if scheme.lower() == "bearer" and value.strip():
        ctx = connection.app.state.ctx
        async with ctx.pool.acquire() as conn:
            actor = await api_keys.authenticate(conn, value.strip(), now=ctx.now(), request_id=current_request_id())
    state[API_ACTOR] = actor
    return actor


async def authenticate_cookie(connection: ASGIConnection[Any, Any, Any, Any]) -> admins.AdminSession | None:
    """The signed-in admin of the session cookie, once per request; None if absent or expired."""
    state = connection.scope.setdefault("state", {})
    if ADMIN_SESSION in state:
        return state[ADMIN_SESSION]  # type: ignore[no-any-return]
    token = connection.cookies.get(COOKIE)
    session = None
    if token:
        ctx = connection.app.state.ctx
        async with ctx.pool.acquire() as conn:
            session = await admins.resume_session(conn, token, now=ctx.now(), idle=ctx.settings.cookie_idle_timeout)
    state[ADMIN_SESSION] = session
    return session


async def role_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Refuse (403) a caller whose role does not grant what the route needs."""
    need = needs(str(connection.scope.get("method", "GET")), handler.opt)
    if need in (PUBLIC, "read"):
        return
    if connection.scope["path"].startswith("/api/"):
        role = (actor.role if (actor := await authenticate_api_key(connection)) else None)
    else:
        role = (session.admin.role if (session := await authenticate_cookie(connection)) else None)
    if role is None:
        return  # not signed in: the handler's own authentication answers
    if not can(role, need):
        if need in ("manage_members", "manage_api_keys"):
            raise Forbidden("owner_required", "Only an owner can do this.")
        raise Forbidden("read_only", "Your role can view but not change this.")
