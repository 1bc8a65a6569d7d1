"""OAuth protected-resource metadata (RFC 9728): an MCP server's (PAP-6-06, PAP-4.3-26)
and, for PAP 1.0, the company's own at ``https://{domain}/.well-known/oauth-protected-resource``
(ADR 0004 §1, §7): where a 1.0 agent learns which issuer signs it in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from frontdoor_protocol import REQUIRED_DPOP_ALGORITHM, format_scope, htu_normalize

__all__ = [
    "PROTECTED_RESOURCE_WELL_KNOWN",
    "company_protected_resource_metadata",
    "protected_resource_metadata",
    "protected_resource_metadata_url",
    "resource_origin",
]

PROTECTED_RESOURCE_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
_UNQUOTABLE: Final = frozenset('"\\')


def _check_url(url: str, what: str) -> None:
    try:
        htu_normalize(url)
    except ValueError:
        raise ValueError(f"{what} must be an absolute http(s) URL") from None
    parts = urlsplit(url)
    if parts.query or parts.fragment or "#" in url or not _UNQUOTABLE.isdisjoint(url):
        raise ValueError(f"{what} must have no query or fragment")


def protected_resource_metadata_url(resource: str) -> str:
    """Where the metadata of ``resource`` is served (RFC 9728 §3.1).

    The well-known path goes between the host and the resource's path:
    ``https://shop.example/mcp`` → ``https://shop.example/.well-known/oauth-protected-resource/mcp``.

    Args:
        resource: The MCP server's ``url``, as listed in ``poppy.json``.

    Returns:
        The metadata URL.

    Raises:
        ValueError: If ``resource`` is not an absolute http(s) URL without query or fragment.
    """
    _check_url(resource, "resource")
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, PROTECTED_RESOURCE_WELL_KNOWN + path, "", ""))


def protected_resource_metadata(
    resource: str,
    issuer: str,
    *,
    scopes: Sequence[str] = (),
    dpop_bound: bool = True,
    resource_name: str | None = None,
    dpop_supported: bool | None = None,
) -> dict[str, Any]:
    """The RFC 9728 §2 document an MCP server serves at :func:`protected_resource_metadata_url`.

    Args:
        resource: The MCP server's ``url``, exactly as in ``poppy.json`` (PAP-6-05).
        issuer: Your Frontdoor issuer (``auth.issuer``): MCP clients get tokens there
            (PAP-6-06).
        scopes: The scopes the server's tools use, for ``scopes_supported``.
        dpop_bound: Whether the server takes DPoP-bound tokens (new MCP servers SHOULD,
            PAP-4.3-25): lists ES256 in ``dpop_signing_alg_values_supported`` (PAP-4.3-26)
            and sets ``dpop_bound_access_tokens_required``. ``False`` for a server that only
            takes Bearer tokens; tell Frontdoor the same, so it issues Bearer tokens for it.
        resource_name: A name to show people, optional.
        dpop_supported: Whether to list ES256 in ``dpop_signing_alg_values_supported``
            even though bound tokens are not required; defaults to ``dpop_bound``.

    Returns:
        The JSON object to serve with ``Content-Type: application/json``.

    Raises:
        ValueError: If ``resource`` or ``issuer`` is not an absolute http(s) URL, or a
            scope is not a scope-token.
    """
    _check_url(resource, "resource")
    _check_url(issuer, "issuer")
    metadata: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
    }
    if scopes:
        metadata["scopes_supported"] = format_scope(scopes).split(" ")
    if dpop_bound if dpop_supported is None else dpop_supported:
        metadata["dpop_signing_alg_values_supported"] = [REQUIRED_DPOP_ALGORITHM]
    metadata["dpop_bound_access_tokens_required"] = dpop_bound
    if resource_name is not None:
        metadata["resource_name"] = resource_name
    return metadata


def resource_origin(url: str) -> str:
    """The ``scheme://host[:port]`` origin of an absolute http(s) URL, lower-cased.

    Raises:
        ValueError: If ``url`` is not an absolute http(s) URL.
    """
    try:
        htu_normalize(url)
    except ValueError:
        raise ValueError("url must be an absolute http(s) URL") from None
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), "", "", ""))


def company_protected_resource_metadata(
    origin: str,
    issuer: str,
    *,
    scopes: Sequence[str] = (),
    resource_name: str | None = None,
) -> dict[str, Any]:
    """The company's own RFC 9728 document for PAP 1.0, served at the root of each domain.

    Serve it at ``https://{domain}`` + :data:`PROTECTED_RESOURCE_WELL_KNOWN` (what
    :func:`protected_resource_metadata_url` of the origin gives). ``resource`` is the origin
    exactly, without path, port or trailing slash where the domain has none (ADR 0004 §1),
    ``authorization_servers`` your Frontdoor issuer. 1.0 access tokens may be Bearer or
    DPoP-bound, so ES256 is listed but bound tokens are not required.

    Args:
        origin: Your public origin, e.g. ``https://shop.example`` (a trailing ``/`` is dropped).
        issuer: Your Frontdoor issuer (``auth.issuer``).
        scopes: The scopes your API uses, for ``scopes_supported``.
        resource_name: A name to show people, optional.

    Returns:
        The JSON object to serve with ``Content-Type: application/json``.

    Raises:
        ValueError: If ``origin`` is not an origin (it has a path, query or fragment), or
            ``issuer`` is not an absolute http(s) URL, or a scope is not a scope-token.
    """
    trimmed = origin[:-1] if origin.endswith("/") else origin
    _check_url(trimmed, "origin")
    if urlsplit(trimmed).path or trimmed != resource_origin(trimmed):
        raise ValueError("origin must be scheme://host[:port] in lower case, without a path")
    return protected_resource_metadata(
        trimmed, issuer, scopes=scopes, dpop_bound=False, dpop_supported=True, resource_name=resource_name
    )
