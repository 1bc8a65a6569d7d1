"""What the agent-facing checks read of a request, whichever entry point received it.

The operations endpoint is served by Litestar and, for ``POST .../confirm``, by the lean
ASGI route in front of it (:mod:`.http.lean_routes`, issue #13 §4). Both hand the shared
code (:func:`.agent_auth.authenticate`, the confirm in :mod:`.http.agent_operations`) an
:class:`Inbound`, so the DPoP proof's ``htu`` (RFC 9449 §4.3), the rate-limit network and
the headers are read one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from frontdoor_httpkit import client_address_from
from litestar import Request

__all__ = ["Inbound"]


@dataclass(frozen=True, slots=True)
class Inbound:
    """The request as sent: method, path still percent-encoded, query, headers, TCP peer."""

    method: str
    path: str
    query: str
    headers: Sequence[tuple[str, str]]  # names as sent (lower case under ASGI), repeated fields kept
    peer: str

    @classmethod
    def of(cls, request: Request[Any, Any, Any]) -> Inbound:
        """A Litestar request."""
        raw = request.scope.get("raw_path")
        path = raw.decode("ascii", "replace") if isinstance(raw, bytes) and raw else request.url.path
        return cls(method=request.method, path=path, query=request.url.query,
                   headers=list(request.headers.multi_items()),
                   peer=request.client.host if request.client else "unknown")

    @classmethod
    def from_scope(cls, scope: dict[str, Any]) -> Inbound:
        """An ASGI HTTP scope (the lean route), read as Litestar reads it."""
        raw = scope.get("raw_path")
        path = raw.decode("ascii", "replace") if isinstance(raw, bytes) and raw else (
            scope.get("root_path", "") + scope["path"])
        client = scope.get("client")
        return cls(method=scope["method"], path=path, query=scope.get("query_string", b"").decode(),
                   headers=[(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]],
                   peer=str(client[0]) if client else "unknown")

    def network(self, trusted_proxies: str) -> str:
        """The client's network key for rate limiting (``frontdoor_httpkit.client_address``)."""
        forwarded = [value for name, value in self.headers if name.lower() == "x-forwarded-for"]
        return client_address_from(self.peer, forwarded, trusted_proxies)

    def url(self, base_url: str) -> str:
        """The URL the agent addressed: the configured public base (never the Host header) and
        the path as sent (the proof's ``htu`` is compared with it)."""
        return f"{base_url}{self.path}" + (f"?{self.query}" if self.query else "")
