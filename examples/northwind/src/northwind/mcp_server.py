"""Northwind's MCP server (the official ``mcp`` package): a public tool, account tools, ordering tools.

The sdk's middleware has already verified every request to ``/mcp``, including the
scopes of the tool a ``tools/call`` names (:data:`northwind.protection.TOOL_SCOPES`), so
the tools only read who is calling.

With operations on (``NorthwindConfig.ledger_url``), ``reorder`` and ``place_order``
propose an operation exactly as the API does (:mod:`northwind.ordering`, the same
``action_key``) and return it in ``structuredContent.operation`` (Operations §4.2):
nothing is ordered until the agent confirms it at the operations endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import msgspec
from frontdoor_sdk import Caller, LedgerError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from northwind import catalog
from northwind.catalog import Order, Product
from northwind.ordering import InvalidOrder, Ordering, OrderItem
from northwind.protection import signed_in_account, verified_caller

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Proposing changes nothing yet, and the same action returns the same operation.
_PROPOSES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class ItemArgument:
    """One line of ``place_order``: a product's SKU (see search_products) and how many (1 to 99)."""

    sku: str
    quantity: int


def _error(code: str, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"error": code},
                          is_error=True)


async def _propose(ctx: Context[Any, Any], propose: Callable[[Caller], Awaitable[dict[str, Any]]]) -> CallToolResult:
    request = ctx.request_context.request  # the HTTP request, with the sdk's verified caller
    if request is None:
        raise RuntimeError("Northwind serves MCP over HTTP only")
    try:
        operation = await propose(verified_caller(request.scope))
    except InvalidOrder as invalid:
        return _error(invalid.code, invalid.description)
    except LedgerError as failure:
        refusal = failure.refusal()
        return _error(refusal.error, refusal.body.get("error_description", refusal.error))
    body = {"operation": operation}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body))], structured_content=body)


def build_mcp_server(ordering: Ordering | None = None) -> MCPServer:
    """The MCP server, with its Streamable HTTP session manager ready to run.

    Stateless, JSON responses: each POST is answered on its own, so any replica can take
    any request and no MCP session outlives the PAP Session that authorised it.

    Args:
        ordering: Proposes orders; without it the ordering tools are not offered.
    """
    server: MCPServer = MCPServer("Northwind", instructions="Northwind's product catalogue and your orders.")

    @server.tool(annotations=_READ_ONLY)
    def search_products(query: str = "") -> list[Product]:
        """Search Northwind's products by name; an empty query lists them all."""
        return catalog.search_products(query)

    @server.tool(annotations=_READ_ONLY)
    def list_orders(ctx: Context[Any, Any]) -> list[Order]:
        """The signed-in user's Northwind orders, newest first (needs orders:read)."""
        request = ctx.request_context.request  # the HTTP request, with the sdk's verified caller
        if request is None:
            raise RuntimeError("Northwind serves MCP over HTTP only")
        return catalog.orders_of(signed_in_account(request.scope))

    if ordering is not None:

        @server.tool(annotations=_PROPOSES)
        async def reorder(ctx: Context[Any, Any], order_id: str | None = None) -> CallToolResult:
            """Propose ordering one of your Northwind orders again (your latest if order_id is omitted).

            Returns an operation in structuredContent.operation: nothing is ordered until you
            confirm it at Northwind's operations endpoint (needs orders:read).
            """
            return await _propose(ctx, lambda caller: ordering.reorder(caller, order_id))

        @server.tool(annotations=_PROPOSES)
        async def place_order(ctx: Context[Any, Any], items: list[ItemArgument]) -> CallToolResult:
            """Propose a new Northwind order of items (sku, quantity).

            Returns an operation in structuredContent.operation: nothing is ordered until you
            confirm it at Northwind's operations endpoint (needs orders:read).
            """
            try:
                lines = msgspec.convert([asdict(item) for item in items], type=list[OrderItem])
            except msgspec.ValidationError:
                return _error("invalid_request", "items must be 1 to 20 {sku, quantity} lines")
            if not 1 <= len(lines) <= 20:
                return _error("invalid_request", "items must be 1 to 20 {sku, quantity} lines")
            return await _propose(ctx, lambda caller: ordering.place(caller, lines))

    # Builds server.session_manager, which the app mounts at /mcp (the Starlette app it
    # returns is not needed inside Litestar).
    server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        # Host/Origin checks guard unauthenticated local servers against DNS rebinding.
        # Here every request carries a token bound to the public URL, and Host is not
        # trusted for anything; the checks would only break deployments behind a proxy.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server
