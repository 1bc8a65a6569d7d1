"""The PAP 1.0 paired-discovery check of one domain's three documents [S §2].

An agent reads ``https://{domain}/.well-known/poppy.json``, the domain's RFC 9728
protected-resource metadata and the issuer's RFC 8414 metadata, and stops at the first
mismatch; this pure check reports every mismatch at once, one finding code each, so the
publish check and the dashboard can show them. Every comparison is exact, character for
character (hostname case aside where [S §2] allows it):

- ``resource`` is exactly ``https://{domain}`` (``resource_mismatch``);
- the company's issuer (``auth.issuer``, or the only authorization server) is one of
  ``authorization_servers`` (``issuer_not_authorization_server``); several servers need
  ``auth.issuer`` to choose one (``issuer_ambiguous``);
- the AS metadata ``issuer`` equals that issuer (``issuer_mismatch``);
- the AS metadata ``protected_resources`` lists ``https://{domain}`` without path, port or
  trailing slash (``resource_not_protected``).

The documents are the decoded JSON values; each document's own shape is checked elsewhere
(:func:`~frontdoor_protocol.discovery_check.check_discovery_document`,
:func:`~frontdoor_protocol.metadata_check.check_metadata`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from frontdoor_protocol.domain_name import normalize_domain
from frontdoor_protocol.finding import FindingCode, Findings, excerpt

__all__ = ["check_discovery_documents"]

_REQUIREMENT = "PAP 1.0 [S §2]"


def _object(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def _same_origin_ignoring_host_case(listed: str, expected: str) -> bool:
    scheme, sep, host = listed.partition("://")
    return bool(sep) and scheme == "https" and "https://" + host.lower() == expected


def check_discovery_documents(
    *,
    domain: str,
    poppy: object,
    protected_resource: object,
    authorization_server: object,
) -> Findings:
    """Cross-check a domain's ``poppy.json``, protected-resource and issuer metadata.

    Args:
        domain: The domain the documents are served for.
        poppy: The decoded ``poppy.json``.
        protected_resource: The decoded ``/.well-known/oauth-protected-resource`` document.
        authorization_server: The decoded RFC 8414 metadata of the company's issuer.

    Returns:
        One error finding per mismatch; empty when the three agree.
    """
    findings = Findings()
    expected_resource = f"https://{normalize_domain(domain)}"
    resource_doc = _object(protected_resource)
    resource = resource_doc.get("resource")
    if resource != expected_resource:
        findings.error(
            FindingCode.RESOURCE_MISMATCH,
            "/resource",
            f"The protected-resource metadata names resource {excerpt(resource)}, not https://{{domain}}.",
            "Publish resource exactly as https:// and the domain, with no path, port or trailing slash.",
            _REQUIREMENT,
        )
    servers = _strings(resource_doc.get("authorization_servers"))
    auth_issuer = _object(_object(poppy).get("auth")).get("issuer")
    issuer: str | None = auth_issuer if isinstance(auth_issuer, str) else None
    if issuer is None and len(servers) > 1:
        findings.error(
            FindingCode.ISSUER_AMBIGUOUS,
            "/auth/issuer",
            "Several authorization servers are listed and poppy.json has no auth.issuer to choose one.",
            "Publish auth.issuer in poppy.json, equal to one listed authorization server.",
            _REQUIREMENT,
        )
    elif issuer is None and len(servers) == 1:
        issuer = servers[0]
    if issuer is not None and issuer not in servers:
        findings.error(
            FindingCode.ISSUER_NOT_AUTHORIZATION_SERVER,
            "/authorization_servers",
            "The company's issuer is not among the protected resource's authorization_servers.",
            "List auth.issuer, character for character, in authorization_servers.",
            _REQUIREMENT,
        )
    metadata = _object(authorization_server)
    if issuer is not None and metadata.get("issuer") != issuer:
        findings.error(
            FindingCode.ISSUER_MISMATCH,
            "/issuer",
            f"The issuer metadata names issuer {excerpt(metadata.get('issuer'))}, not the company's issuer.",
            "Serve the metadata of the issuer poppy.json names, with that exact issuer value.",
            _REQUIREMENT,
        )
    protected = _strings(metadata.get("protected_resources"))
    if not any(_same_origin_ignoring_host_case(listed, expected_resource) for listed in protected):
        findings.error(
            FindingCode.RESOURCE_NOT_PROTECTED,
            "/protected_resources",
            "The issuer metadata's protected_resources does not list https://{domain}.",
            "List https:// and the domain in protected_resources, with no path, port or trailing slash.",
            _REQUIREMENT,
        )
    return findings
