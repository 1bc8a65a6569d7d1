"""The URL an agent addressed, rebuilt from an ASGI scope and your public base URL.

A DPoP proof names the URL the agent called (``htu``); behind a proxy or a load balancer
the app sees another scheme, host or port. So the URL is your configured public base
URL plus the request's path, never the ``Host`` header (which whoever sends the request
chooses) unless you ask for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from frontdoor_protocol import htu_normalize

__all__ = ["check_public_url", "request_url"]


def check_public_url(public_url: str | None) -> str | None:
    """Validate a public base URL and drop its trailing slash.

    Args:
        public_url: E.g. ``https://shop.example``, or with the path prefix a proxy strips;
            ``None`` to trust ``Host`` and the scope's scheme.

    Returns:
        The base URL without trailing slash, or ``None``.

    Raises:
        ValueError: If it is not an absolute http(s) URL without query or fragment.
    """
    if public_url is None:
        return None
    htu_normalize(public_url)
    if "?" in public_url or "#" in public_url:
        raise ValueError("public_url must have no query or fragment")
    return public_url.rstrip("/")


def _host(scope: Mapping[str, Any]) -> str:
    for key, value in scope.get("headers", ()):
        if bytes(key).lower() == b"host":
            return bytes(value).decode("latin-1")
    return ""


def request_url(scope: Mapping[str, Any], public_url: str | None) -> str:
    """The full URL of an HTTP request, query included.

    Args:
        scope: The ASGI HTTP scope.
        public_url: A base URL from :func:`check_public_url`, or ``None``.

    Returns:
        ``public_url`` + the path as sent (``raw_path``) + ``?query`` when there is one.
    """
    raw_path = scope.get("raw_path")
    path = bytes(raw_path).decode("latin-1").split("?", 1)[0] if raw_path else quote(str(scope["path"]))
    base = public_url if public_url is not None else f"{scope.get('scheme', 'http')}://{_host(scope)}"
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    return f"{base}{path}" + (f"?{query}" if query else "")
