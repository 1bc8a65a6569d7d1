"""Northwind's web app: ``poppy.json``, an OpenAPI API, an MCP server, a company agent, a login page.

Read top to bottom: the public routes, the protected API routes, the MCP endpoint, then
:func:`create_app`, which wires the sdk's verifier and middleware around all of it. The
company agent (the concierge, answering Frontdoor's hosted conversations through the perform
webhook's endpoint) is in :mod:`northwind.concierge`; the login page
Frontdoor sends users to (the login handoff) is in :mod:`northwind.login`.

Operations (placing orders) are on when ``NorthwindConfig.ledger_url`` is set:
:mod:`northwind.ordering` proposes them, :mod:`northwind.operation_page` shows them in the
agent's browser, :mod:`northwind.perform` performs them when Frontdoor's webhook says so
(with ``webhook_secret``). Without ``ledger_url`` those routes and MCP tools do not exist.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
from frontdoor_sdk import (
    BrowserJoin,
    FrontdoorAccounts,
    FrontdoorConversations,
    FrontdoorLedger,
    FrontdoorMiddleware,
    FrontdoorVerifier,
    JoinCallback,
    WebhookVerifier,
    company_protected_resource_metadata,
    issuer_key_source,
    protected_resource_metadata,
    protected_resource_metadata_url,
)
from litestar import Litestar, MediaType, Request, Response, get
from litestar.datastructures import State
from litestar.handlers import ASGIRouteHandler, HTTPRouteHandler, asgi
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme, Server
from litestar.params import FromQuery
from litestar.types import Receive, Scope, Send
from mcp.server.mcpserver import MCPServer

from northwind import catalog
from northwind.account_page import account_router
from northwind.browser import browser_router
from northwind.catalog import Order, Product
from northwind.concierge import Concierge
from northwind.config import NorthwindConfig
from northwind.join import JOIN_CALLBACK_PATH, JOINED_PAGE_PATH, join_router
from northwind.login import login_router
from northwind.mcp_server import build_mcp_server
from northwind.mediated import mediated_router
from northwind.operation_page import operation_page_router
from northwind.ordering import Ordering, ordering_handlers
from northwind.perform import PERFORMER_STATE_KEY, Performer, performed_hook_router, webhook_router
from northwind.protection import ORDERS_READ, protected_paths, signed_in_account


@get("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    """Liveness: answers without calling Frontdoor."""
    return {"status": "ok"}


@get("/api/products", summary="Search products", tags=["products"])
async def list_products(q: FromQuery[str] = "") -> list[Product]:
    """Northwind's products whose name contains ``q``. Any Session, signed out is fine."""
    return catalog.search_products(q)


@get("/api/orders", summary="Your orders", tags=["orders"], description=f"Needs the `{ORDERS_READ}` scope.")
async def list_orders(request: Request[Any, Any, Any]) -> list[Order]:
    """The signed-in user's orders, newest first."""
    return catalog.orders_of(signed_in_account(request.scope))


def _poppy_json(document: Mapping[str, Any]) -> HTTPRouteHandler:
    content = json.dumps(document).encode()

    @get("/.well-known/poppy.json", include_in_schema=False)
    async def poppy_json() -> Response[bytes]:
        """The document Frontdoor generated for this domain, published as is (PAP §3)."""
        return Response(content, media_type=MediaType.JSON)

    return poppy_json


def _mcp_metadata(config: NorthwindConfig) -> HTTPRouteHandler:
    metadata = protected_resource_metadata(
        config.mcp_url, config.issuer, scopes=(ORDERS_READ,), resource_name="Northwind MCP server"
    )

    @get(urlsplit(protected_resource_metadata_url(config.mcp_url)).path, include_in_schema=False)
    async def mcp_resource_metadata() -> dict[str, Any]:
        """RFC 9728 metadata: MCP clients learn here that Frontdoor issues the tokens."""
        return metadata

    return mcp_resource_metadata


def _company_metadata(config: NorthwindConfig) -> HTTPRouteHandler:
    metadata = company_protected_resource_metadata(
        config.origin, config.issuer, scopes=(ORDERS_READ,), resource_name="Northwind"
    )

    @get(urlsplit(protected_resource_metadata_url(config.origin)).path, include_in_schema=False)
    async def company_resource_metadata() -> dict[str, Any]:
        """RFC 9728 metadata at the root (PAP 1.0): agents learn here that Frontdoor signs them in."""
        return metadata

    return company_resource_metadata


def _mcp_endpoint(server: MCPServer) -> ASGIRouteHandler:
    @asgi("/mcp", copy_scope=True)
    async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
        await server.session_manager.handle_request(scope, receive, send)  # type: ignore[arg-type]  # Starlette types

    return mcp


def _openapi(config: NorthwindConfig) -> OpenAPIConfig:
    return OpenAPIConfig(
        title="Northwind",
        version="1.0.0",
        description=(
            "Products and orders. Every call takes a PAP Session Token with a DPoP proof. "
            "Placing an order returns an operation (PAP Operations extension v1): 202 {\"operation\": ...}, "
            "confirmed at the operations endpoint of Northwind's poppy.json."
        ),
        servers=[Server(url=config.origin)],
        components=Components(
            security_schemes={"DPoP": SecurityScheme(type="http", scheme="DPoP", description="PAP Session Token")}
        ),
        security=[{"DPoP": []}],
        path="/",
        render_plugins=[JsonRenderPlugin()],  # serves /openapi.json
    )


def _loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme == "http" and (parts.hostname or "") in ("127.0.0.1", "localhost", "::1")


def create_app(config: NorthwindConfig) -> Litestar:
    """Build Northwind for one configuration (tests build as many as they like)."""
    clock = config.clock or (lambda: datetime.now(UTC))
    # Both PAP profiles on the same routes: a Poppy-Session request goes the 1.0 way (ADR 0004).
    verifier = FrontdoorVerifier(
        config.issuer,
        config.credential,
        http=config.http_client,
        clock=config.clock,
        resource_metadata_url=protected_resource_metadata_url(config.origin),
        # Served on an http loopback origin (make run): development agents are http loopback too.
        allow_http_loopback=_loopback_origin(config.origin),
    )
    # Operations: proposed in Frontdoor's ledger, performed when its webhook says so.
    ledger = (
        FrontdoorLedger(config.ledger_url, config.credential, http=config.http_client)
        if config.ledger_url is not None else None
    )
    ordering = Ordering(ledger, config.operation_page_url) if ledger is not None else None
    # The concierge answers Frontdoor's hosted conversations (PAP §7) through the same ledger.
    conversations = (
        FrontdoorConversations(config.ledger_url, config.credential, http=config.http_client)
        if config.ledger_url is not None else None
    )
    performer = Performer()
    mcp_server = build_mcp_server(ordering)
    # Agents' browsers join their Sessions here (PAP §5); Frontdoor checks the assertions.
    browser = BrowserJoin(config.issuer, config.credential, http=config.http_client)
    # PAP 1.0 joins end here: Frontdoor hosts the join, Northwind keeps its own cookie (ADR 0004 §8).
    join = JoinCallback(config.issuer, config.credential, callback_url=f"{config.origin}{JOIN_CALLBACK_PATH}",
                        cookie_secret=config.join_cookie_secret, http=config.http_client, clock=config.clock,
                        landing=JOINED_PAGE_PATH)
    # The customer's connected-agents page lists and disconnects agents through Frontdoor.
    accounts = FrontdoorAccounts(config.issuer, config.credential, http=config.http_client)
    # The login page fetches the issuer's JWKS to verify login requests.
    login_http = config.http_client or httpx.AsyncClient(timeout=5.0, follow_redirects=False)
    issuer_keys = issuer_key_source(config.issuer, login_http, clock=clock)

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        try:
            async with verifier, browser, join, accounts, mcp_server.session_manager.run():
                yield
        finally:
            if ledger is not None:
                await ledger.aclose()
            if conversations is not None:
                await conversations.aclose()
            if config.http_client is None:
                await login_http.aclose()

    # The sdk types ASGI scopes as mappings, Litestar as TypedDicts: the same objects at run time.
    frontdoor = DefineMiddleware(
        cast("Any", FrontdoorMiddleware),
        verifier=verifier,
        protect=protected_paths(config.mcp_url),
        public_url=config.origin,  # DPoP proofs name this origin, whatever Host says
    )
    handlers: list[Any] = [
        healthz,
        _poppy_json(config.poppy),
        list_products,
        list_orders,
        _mcp_endpoint(mcp_server),
        _mcp_metadata(config),
        _company_metadata(config),
        login_router(config, issuer_keys, clock),
        mediated_router(config, issuer_keys, clock),  # Mediated Sign-In's relay (PAP §4.7)
        browser_router(browser),  # agents' browsers (PAP §5)
        join_router(join),  # agents' browsers joined by Frontdoor's hosted 1.0 join
        account_router(config, accounts),  # the customer's connected agents
    ]
    if ordering is not None and ledger is not None:
        handlers.extend(ordering_handlers(ordering))  # POST /api/orders, /api/orders/reorder: 202 {operation}
        handlers.append(operation_page_router(config.origin, browser, ledger))  # /operations/{id}
    if config.webhook_secrets:
        webhooks = WebhookVerifier(config.webhook_secrets, clock=config.clock)
        concierge = Concierge(conversations, ordering) if conversations is not None else None
        handlers.append(webhook_router(webhooks, performer, concierge))  # POST /webhooks/frontdoor
    if config.expose_test_hooks:
        handlers.append(performed_hook_router(performer))  # GET /_test/performed/{id}: tests only
    return Litestar(
        route_handlers=handlers,
        middleware=[frontdoor],
        lifespan=[lifespan],
        openapi_config=_openapi(config),
        state=State({PERFORMER_STATE_KEY: performer}),
    )

