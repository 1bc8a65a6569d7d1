"""Litestar integration: a plugin, a per-route guard and a ``caller`` dependency.

Needs the ``litestar`` extra (``pip install frontdoor-sdk[litestar]``)::

    app = Litestar(
        route_handlers=[orders],
        plugins=[FrontdoorPlugin(verifier, public_url="https://shop.example")],
    )

    @get("/api/orders", guards=[require_caller(scopes=["orders:read"])])
    async def orders(caller: NamedDependency[Caller]) -> list[Order]: ...

The guard verifies the request and stores the :class:`Caller`; a refusal is answered with
its own status, challenge and body (the plugin registers the handler). The ``caller``
dependency reads what the guard stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

from litestar import Request, Response
from litestar.config.app import AppConfig
from litestar.connection import ASGIConnection
from litestar.di import Provide
from litestar.exceptions import ImproperlyConfiguredException
from litestar.handlers.base import BaseRouteHandler
from litestar.plugins import InitPlugin

from frontdoor_sdk.caller import Caller
from frontdoor_sdk.middleware import STATE_KEY, caller_of
from frontdoor_sdk.refusal import Refusal
from frontdoor_sdk.request_url import check_public_url, request_url
from frontdoor_sdk.verifier import FrontdoorVerifier

__all__ = ["FrontdoorPlugin", "FrontdoorRefused", "require_caller"]

Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]


class FrontdoorRefused(Exception):
    """Raised by :func:`require_caller` to answer with a :class:`Refusal`."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.error)
        self.refusal = refusal


def _respond(_: Request[Any, Any, Any], exc: FrontdoorRefused) -> Response[bytes]:
    refusal = exc.refusal
    headers = {name: value for name, value in refusal.headers.items() if name.lower() != "content-type"}
    return Response(refusal.content, status_code=refusal.status, headers=headers, media_type="application/json")


def _provide_caller(request: Request[Any, Any, Any]) -> Caller:
    caller = caller_of(request.scope)
    if caller is None:
        raise ImproperlyConfiguredException("the 'caller' dependency needs guards=[require_caller(...)] on the route")
    return caller


class FrontdoorPlugin(InitPlugin):
    """Registers the refusal handler and the ``caller`` dependency; holds the verifier.

    Args:
        verifier: The shared verifier (close it on shutdown).
        public_url: Your public base URL, e.g. ``https://shop.example``; ``None`` trusts
            the ``Host`` header (only behind a proxy that sets it).
    """

    def __init__(self, verifier: FrontdoorVerifier, *, public_url: str | None) -> None:
        self.verifier = verifier
        self.public_url = check_public_url(public_url)

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        """Add the exception handler and the ``caller`` dependency."""
        app_config.exception_handlers = {**app_config.exception_handlers, FrontdoorRefused: _respond}
        app_config.dependencies.setdefault("caller", Provide(_provide_caller, sync_to_thread=False))
        return app_config


def require_caller(*, scopes: Iterable[str] = (), resource_url: str | None = None, mcp_dpop: bool = True) -> Guard:
    """A route guard that admits only verified callers holding ``scopes``.

    Args:
        scopes: Scopes the route needs, all of them; empty admits any live Session.
        resource_url: Your MCP server's ``url`` when the route is that server.
        mcp_dpop: Whether that MCP server takes DPoP tokens.

    Returns:
        The guard, for ``guards=[...]``.
    """
    required = tuple(scopes)

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        plugin = connection.app.plugins.get(FrontdoorPlugin)
        scope = cast("dict[str, Any]", connection.scope)
        outcome = await plugin.verifier.verify(
            str(scope.get("method", "GET")),
            request_url(scope, plugin.public_url),
            connection.headers,
            required_scopes=required,
            resource_url=resource_url,
            mcp_dpop=mcp_dpop,
        )
        if isinstance(outcome, Refusal):
            raise FrontdoorRefused(outcome)
        state = scope.setdefault("state", {})
        state[STATE_KEY] = outcome

    return guard
