"""Northwind's MCP server (the official ``mcp`` package): a public tool and an account tool.

The sdk's middleware has already verified every request to ``/mcp``, including the
scopes of the tool a ``tools/call`` names (:data:`northwind.protection.TOOL_SCOPES`), so
the tools only read who is calling.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations

from northwind import catalog
from northwind.catalog import Order, Product
from northwind.protection import signed_in_account

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_mcp_server() -> MCPServer:
    """The MCP server, with its Streamable HTTP session manager ready to run.

    Stateless, JSON responses: each POST is answered on its own, so any replica can take
    any request and no MCP session outlives the PAP Session that authorised it.
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
