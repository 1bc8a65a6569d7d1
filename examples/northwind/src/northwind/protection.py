"""Which paths need a Session Token, and with which scopes: the one place to read.

Everything under ``/api`` and ``/mcp`` is protected by the sdk's middleware, which answers
refusals itself (401 ``invalid_token``, 403 ``sign_in_required``/``insufficient_scope``
with their ``WWW-Authenticate`` challenges). A handler behind it only runs for a verified
caller, found with :func:`frontdoor_sdk.caller_of`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from frontdoor_sdk import Caller, Requirement, caller_of

ORDERS_READ: Final = "orders:read"
"""The scope a user grants to let an agent see their orders."""

TOOL_SCOPES: Final[Mapping[str, tuple[str, ...]]] = {
    "list_orders": (ORDERS_READ,),
    # Orders belong to an account: proposing one needs a signed-in Session.
    "reorder": (ORDERS_READ,),
    "place_order": (ORDERS_READ,),
}
"""Scopes per MCP tool; tools not listed take any live Session, signed in or not."""


def protected_paths(mcp_url: str) -> dict[str, Requirement]:
    """Path prefixes and what they need (the longest matching prefix wins).

    Args:
        mcp_url: The MCP server's ``url``: it takes only tokens issued for it.
    """
    return {
        # Every API path takes a Session Token; no scope means signed out is fine.
        "/api": Requirement(),
        "/api/orders": Requirement(scopes=(ORDERS_READ,)),  # reading and proposing orders
        "/mcp": Requirement(resource_url=mcp_url, tool_scopes=TOOL_SCOPES),
    }


def verified_caller(scope: Mapping[str, Any]) -> Caller:
    """The verified caller of a request, signed in or not.

    Raises:
        RuntimeError: If the request did not go through the middleware: the path is
            missing from :func:`protected_paths` (a bug; never serve the request).
    """
    caller = caller_of(scope)
    if caller is None:
        raise RuntimeError("no verified caller: protect this path")
    return caller


def signed_in_account(scope: Mapping[str, Any]) -> str:
    """The account of the verified, signed-in caller of a request.

    Raises:
        RuntimeError: If the request did not go through the middleware signed in: the
            path is missing from :func:`protected_paths` (a bug; never serve the data).
    """
    caller = caller_of(scope)
    if caller is None or caller.account is None:
        raise RuntimeError("no signed-in caller: protect this path with a scope")
    return caller.account
