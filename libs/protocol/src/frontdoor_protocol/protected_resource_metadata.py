"""RFC 9728 protected-resource metadata a PAP 1.0 company serves on each domain [S §2].

At ``https://{domain}/.well-known/oauth-protected-resource``: ``resource`` is exactly
``https://{domain}`` (no path, port or trailing slash), ``authorization_servers`` lists
the tenant's issuer. Access tokens travel in the ``Authorization`` header only (RFC 6750
§2.3 forbids them in the URL), so ``bearer_methods_supported`` is ``["header"]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import msgspec

from frontdoor_protocol.domain_name import is_domain_name, normalize_domain
from frontdoor_protocol.https_url import https_url_problem, is_loopback_http_url
from frontdoor_protocol.scopes import is_scope_token

__all__ = [
    "PROTECTED_RESOURCE_WELL_KNOWN",
    "ProtectedResourceMetadata",
    "build_protected_resource_metadata",
    "domain_resource",
    "protected_resource_metadata_url",
]

PROTECTED_RESOURCE_WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
"""The RFC 9728 §3 well-known path."""


class ProtectedResourceMetadata(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """RFC 9728 §2 metadata, the members a PAP company publishes."""

    resource: str
    authorization_servers: tuple[str, ...]
    bearer_methods_supported: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None
    resource_name: str | None = None


def domain_resource(domain: str) -> str:
    """The resource identifier of a domain: ``https://{lowercase domain}`` [S §2].

    Raises:
        ValueError: When ``domain`` is not a DNS name.
    """
    if not is_domain_name(domain):
        raise ValueError("not a domain name")
    return f"https://{normalize_domain(domain)}"


def protected_resource_metadata_url(resource: str) -> str:
    """Where a resource's metadata lives (RFC 9728 §3.1: the well-known path goes before the path).

    Raises:
        ValueError: When ``resource`` is not an https URL without query or fragment.
    """
    if https_url_problem(resource) is not None and not is_loopback_http_url(resource):
        raise ValueError("a resource is an https URL")
    parts = urlsplit(resource)
    if parts.query or parts.fragment:
        raise ValueError("a resource has no query or fragment")
    return urlunsplit((parts.scheme, parts.netloc, PROTECTED_RESOURCE_WELL_KNOWN + parts.path.rstrip("/"), "", ""))


def build_protected_resource_metadata(
    *,
    resource: str,
    authorization_servers: Iterable[str],
    scopes_supported: Iterable[str] | None = None,
    resource_name: str | None = None,
    allow_http_loopback: bool = False,
) -> dict[str, Any]:
    """The RFC 9728 metadata document of one protected resource.

    Args:
        resource: The resource identifier, ``https://{domain}`` for a company domain.
        authorization_servers: The issuers whose tokens it accepts (the tenant's issuer).
        scopes_supported: The scopes it understands, if published.
        resource_name: A human-readable name (RFC 9728 §2).
        allow_http_loopback: Development only: accept ``http://`` loopback URLs.

    Returns:
        The document as plain JSON values.

    Raises:
        ValueError: For a non-https resource or server, a resource with a query or
            fragment, a malformed scope or an empty name.
    """
    servers = tuple(dict.fromkeys(authorization_servers))
    for url in (resource, *servers):
        if https_url_problem(url) is not None and not (allow_http_loopback and is_loopback_http_url(url)):
            raise ValueError("resource and authorization servers must be https URLs")
    parts = urlsplit(resource)
    if parts.query or parts.fragment:
        raise ValueError("a resource has no query or fragment (RFC 9728 §1.2)")
    scopes = None if scopes_supported is None else tuple(dict.fromkeys(scopes_supported))
    if scopes is not None and not all(is_scope_token(scope) for scope in scopes):
        raise ValueError("every scope must be a scope-token (RFC 6749 §3.3)")
    if resource_name is not None and not resource_name.strip():
        raise ValueError("resource_name must not be empty")
    metadata = ProtectedResourceMetadata(
        resource=resource,
        authorization_servers=servers,
        bearer_methods_supported=("header",),
        scopes_supported=scopes,
        resource_name=resource_name,
    )
    built: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(metadata))
    return built
