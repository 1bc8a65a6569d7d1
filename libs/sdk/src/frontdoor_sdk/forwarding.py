"""Headers safe to pass on: an agent's credentials never leave the service they were sent to.

A ``Poppy-Session`` JWT is bound to one method and URL and lives a minute, an access
token and a DPoP proof are the agent's, a cookie is the browser's: none of them is for the
service you call next. When a handler forwards a request (to a backend, another API, a
webhook), build the outgoing headers with :func:`strip_credentials`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["CREDENTIAL_HEADERS", "strip_credentials"]

CREDENTIAL_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "dpop", "poppy-session", "cookie", "dpop-nonce"}
)
"""Header names (lower case) :func:`strip_credentials` drops."""


def strip_credentials(
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | Iterable[tuple[bytes, bytes]],
) -> list[tuple[str, str]]:
    """The headers without the caller's credentials (names compared case-insensitively).

    Drops :data:`CREDENTIAL_HEADERS`: ``Authorization``, ``Proxy-Authorization``, ``DPoP``,
    ``Poppy-Session`` (PAP 1.0), ``Cookie`` and ``DPoP-Nonce``; keeps every other header,
    repeats and order included.

    Args:
        headers: A mapping, ``(name, value)`` pairs, or an ASGI scope's byte pairs.

    Returns:
        ``(name, value)`` pairs, byte pairs decoded as Latin-1.
    """
    pairs: Iterable[tuple[str | bytes, str | bytes]]
    if isinstance(headers, Mapping):
        multi = getattr(headers, "multi_items", None) or getattr(headers, "items", None)
        pairs = multi() if callable(multi) else headers.items()
    else:
        pairs = headers
    kept: list[tuple[str, str]] = []
    for name, value in pairs:
        text_name = name.decode("latin-1") if isinstance(name, bytes) else name
        text_value = value.decode("latin-1") if isinstance(value, bytes) else value
        if text_name.lower() not in CREDENTIAL_HEADERS:
            kept.append((text_name, text_value))
    return kept
