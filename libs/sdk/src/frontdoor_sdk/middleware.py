"""ASGI middleware: verify every protected request before your app sees it.

Requests on protected paths are verified with :class:`FrontdoorVerifier`; a refusal is
answered by the middleware itself, and an accepted request reaches the app with its
:class:`Caller` in ``scope["state"]["frontdoor"]`` (read it with :func:`caller_of`).
Other paths pass through untouched.

The URL a DPoP proof is checked against is built from the configured ``public_url``
(what agents address, e.g. ``https://shop.example``) plus the request's path, never from
the ``Host`` header, which a proxy or an attacker chooses. Pass ``public_url=None`` only
if a trusted proxy sets ``Host`` (and ``scope["scheme"]``) to the public values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Final

import msgspec

from frontdoor_sdk.caller import Caller
from frontdoor_sdk.mcp_tools import called_tool_scopes
from frontdoor_sdk.refusal import Refusal
from frontdoor_sdk.request_url import check_public_url, request_url
from frontdoor_sdk.verifier import FrontdoorVerifier

__all__ = ["STATE_KEY", "FrontdoorMiddleware", "Protect", "Requirement", "caller_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]
"""Any ASGI 3 app (frameworks type their scope and messages each their own way)."""

STATE_KEY: Final = "frontdoor"
"""Where the caller is stored: ``scope["state"][STATE_KEY]``."""
_DEFAULT_MAX_BODY: Final = 1024 * 1024
_POLICY_VIOLATION: Final = 1008


class Requirement(msgspec.Struct, frozen=True, kw_only=True):
    """What a protected path needs.

    Attributes:
        scopes: Scopes every request needs; empty means any live Session, signed in or not.
        resource_url: Your MCP server's ``url`` when the path is that server.
        mcp_dpop: Whether that MCP server takes DPoP tokens.
        tool_scopes: For an MCP server: scopes per tool name, checked on ``tools/call``
            (PAP-6-04), answered with 403 ``sign_in_required``/``insufficient_scope``.
    """

    scopes: tuple[str, ...] = ()
    resource_url: str | None = None
    mcp_dpop: bool = True
    tool_scopes: Mapping[str, tuple[str, ...]] | None = None


Protect = Callable[[str], Requirement | None] | Mapping[str, Requirement | Sequence[str]]
"""A function from path to :class:`Requirement` (``None``: public), or path prefixes mapped
to a requirement or its scopes (the longest matching prefix wins; unmatched is public)."""


def caller_of(scope: Mapping[str, Any]) -> Caller | None:
    """The verified caller of a request the middleware accepted, else ``None``."""
    state = scope.get("state")
    caller = state.get(STATE_KEY) if isinstance(state, Mapping) else None
    return caller if isinstance(caller, Caller) else None


def _prefix_table(protect: Mapping[str, Requirement | Sequence[str]]) -> tuple[tuple[str, Requirement], ...]:
    table: list[tuple[str, Requirement]] = []
    for prefix, value in protect.items():
        if not prefix.startswith("/"):
            raise ValueError("protected path prefixes start with '/'")
        if isinstance(value, Requirement):
            requirement = value
        elif isinstance(value, str):
            requirement = Requirement(scopes=(value,))
        else:
            requirement = Requirement(scopes=tuple(value))
        table.append((prefix.rstrip("/") or "/", requirement))
    table.sort(key=lambda row: len(row[0]), reverse=True)
    return tuple(table)


def _matches(path: str, prefix: str) -> bool:
    return prefix in ("/", path) or path.startswith(prefix + "/")


class FrontdoorMiddleware:
    """Protects paths of an ASGI app with Frontdoor Session Tokens.

    Args:
        app: The ASGI app to protect.
        verifier: The shared verifier.
        protect: Which paths are protected and what they need; see :data:`Protect`.
        public_url: Your public base URL, e.g. ``https://shop.example`` (a path prefix a
            proxy strips may follow). ``None`` trusts ``Host`` and ``scope["scheme"]``.
        max_body: Largest ``tools/call`` body read to find the tool, in bytes.
    """

    def __init__(
        self,
        app: ASGIApp,
        verifier: FrontdoorVerifier,
        *,
        protect: Protect,
        public_url: str | None,
        max_body: int = _DEFAULT_MAX_BODY,
    ) -> None:
        self.app = app
        self._verifier = verifier
        self._public_url = check_public_url(public_url)
        self._max_body = max_body
        self._resolve: Callable[[str], Requirement | None]
        if callable(protect):
            self._resolve = protect
        else:
            table = _prefix_table(protect)
            self._resolve = lambda path: next((req for prefix, req in table if _matches(path, prefix)), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        requirement = self._resolve(scope["path"])
        if requirement is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            # Not part of the protocol's resources: a protected path takes no WebSocket.
            await receive()
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION})
            return
        scopes: Iterable[str] = requirement.scopes
        if requirement.tool_scopes and scope["method"] == "POST":
            body = await _read_body(receive, self._max_body)
            if body is None:
                await _send_plain(send, 413, b"request body too large")
                return
            scopes = (*requirement.scopes, *called_tool_scopes(body, requirement.tool_scopes))
            receive = _replay(body, receive)
        outcome = await self._verifier.verify(
            scope["method"],
            request_url(scope, self._public_url),
            [(bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in scope.get("headers", ())],
            required_scopes=scopes,
            resource_url=requirement.resource_url,
            mcp_dpop=requirement.mcp_dpop,
        )
        if isinstance(outcome, Refusal):
            await _send_refusal(send, outcome)
            return
        state = scope.get("state")
        if not isinstance(state, MutableMapping):
            state = scope["state"] = {}
        state[STATE_KEY] = outcome
        await self.app(scope, receive, send)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _send_refusal(send: Send, refusal: Refusal) -> None:
    content = refusal.content
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in refusal.headers.items()]
    headers.append((b"content-length", str(len(content)).encode("ascii")))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


async def _send_plain(send: Send, status: int, content: bytes) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(content)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
