"""Per-tool scopes at an MCP server: which scopes a JSON-RPC ``tools/call`` needs (PAP-6-04).

An MCP server enforces the Session Token's scopes per tool. Checking them before the
request reaches the MCP library lets the refusal be what the MCP authorization spec and
PAP expect: HTTP 403 with ``sign_in_required`` or ``insufficient_scope`` and ``scope=`` in
the challenge, not a tool result. A body that is not JSON-RPC needs nothing here: the MCP
server answers it with its own error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["called_tool_scopes"]


def _tool_name(message: Any) -> str | None:
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else None


def called_tool_scopes(body: bytes, tool_scopes: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The scopes the tool calls in one MCP request body need.

    Args:
        body: The JSON-RPC request body (one message or a batch).
        tool_scopes: Scopes per tool name; tools not listed need none.

    Returns:
        Every scope of every called tool, in order, without repeats.
    """
    try:
        decoded: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ()
    messages = decoded if isinstance(decoded, list) else [decoded]
    needed: dict[str, None] = {}
    for message in messages:
        name = _tool_name(message)
        if name is not None:
            needed.update(dict.fromkeys(tool_scopes.get(name, ())))
    return tuple(needed)
