"""Checks a fetched ``poppy.json`` the way a personal agent reads it (PAP §3, §3.1, §3.3).

Frontdoor cannot serve a company's document for it (a document speaks only for the host
that served it), so it generates one per domain and checks what the company actually
publishes. Errors are what makes an agent refuse the document or breaks a MUST; warnings
are parts agents ignore. Unknown members are never reported (PAP-3.3-02..05).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from frontdoor_protocol.discovery_auth_check import check_auth
from frontdoor_protocol.discovery_document import ApiType
from frontdoor_protocol.domain_name import domains_equal, is_domain_name
from frontdoor_protocol.extension_name import OPERATIONS_EXTENSION, ExtensionNameKind, extension_name_kind
from frontdoor_protocol.finding import (
    Finding,
    FindingCode,
    Findings,
    excerpt,
    json_pointer,
    json_type_name,
)
from frontdoor_protocol.https_url import check_https_url
from frontdoor_protocol.profile import PROFILES, Profile, parse_protocol_version

__all__ = ["check_discovery_document"]

_FORMAT: Final = "PAP §3.1"
_API_TYPES: Final = frozenset(member.value for member in ApiType)
_C = FindingCode


def check_discovery_document(
    doc: object, served_host: str, *, versions: Collection[str] | None = None
) -> list[Finding]:
    """Validate a parsed ``poppy.json`` as a personal agent would.

    Args:
        doc: The decoded document (decode it with :func:`frontdoor_protocol.loads` so
            duplicate members are already refused).
        served_host: The host that finally served it, after any redirects.
        versions: The ``protocol_version`` values the reader speaks; ``None`` is every
            profile Frontdoor serves (a 0.2-only agent passes ``("0.2",)``).

    Returns:
        Every problem found; an empty list means agents can use the document.
    """
    findings = Findings()
    if not isinstance(doc, dict):
        findings.error(
            _C.NOT_OBJECT,
            "",
            f"The document is {json_type_name(doc)}, not a JSON object.",
            "Publish a JSON object with protocol_version and organization.",
            _FORMAT,
        )
        return findings
    profile = _check_version(doc, findings, PROFILES if versions is None else frozenset(versions))
    _check_organization(doc.get("organization"), served_host, findings)
    has_auth = doc.get("auth") is not None
    if has_auth:
        check_auth(doc["auth"], findings)
    _check_agent(doc.get("agent"), findings, has_auth)
    _check_apis(doc.get("apis"), findings, has_auth)
    _check_web(doc.get("web"), findings, has_auth)
    _check_feedback(doc.get("feedback"), findings, has_auth, profile)
    _check_extensions(doc.get("extensions"), findings, profile)
    if doc.get("agent") is None and not doc.get("apis") and doc.get("web") is None:
        findings.error(
            _C.NOTHING_OFFERED,
            "",
            "The document offers no agent, no apis and no web member.",
            "List at least one of agent, apis or web so agents have something to use.",
            _FORMAT,
        )
    return findings


def _check_version(doc: Mapping[str, Any], findings: Findings, versions: Collection[str]) -> Profile | None:
    value = doc.get("protocol_version")
    if value is None:
        findings.error(
            _C.MISSING_FIELD,
            "/protocol_version",
            "protocol_version is missing.",
            'Add "protocol_version": "0.2".',
            "PAP-3.1-01",
        )
        return None
    if parse_protocol_version(value) is None:
        findings.error(
            _C.INVALID_FIELD,
            "/protocol_version",
            f"protocol_version {excerpt(value)} is not a major.minor string.",
            'Write the version as a string such as "0.2".',
            "PAP-3.1-01",
        )
        return None
    profile = PROFILES.get(value) if value in versions else None
    if profile is None:
        findings.error(
            _C.UNSUPPORTED_VERSION,
            "/protocol_version",
            f"protocol_version {excerpt(value)} is not a version agents here support.",
            "Before 1.0 each version may break the previous one; publish one of: " + ", ".join(sorted(versions)) + ".",
            "PAP-3.1-01",
        )
    return profile


def _check_organization(value: object, served_host: str, findings: Findings) -> None:
    if not isinstance(value, dict):
        code = _C.MISSING_FIELD if value is None else _C.INVALID_FIELD
        findings.error(
            code,
            "/organization",
            "organization must be an object with name and domain.",
            'Add "organization": {"name": ..., "domain": ...}.',
            "PAP-3.1-02",
        )
        return
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        findings.error(
            _C.MISSING_FIELD if name is None else _C.INVALID_FIELD,
            "/organization/name",
            "organization.name must be a non-empty string.",
            "Set it to the company name users know; agents show it on every sign-in and approval.",
            "PAP-4.6-03",
        )
    domain = value.get("domain")
    if domain is None:
        findings.error(
            _C.MISSING_FIELD,
            "/organization/domain",
            "organization.domain is missing.",
            f"Set it to the host serving this document ({excerpt(served_host)}).",
            "PAP-3.1-02",
        )
    elif not is_domain_name(domain):
        findings.error(
            _C.INVALID_FIELD,
            "/organization/domain",
            f"organization.domain {excerpt(domain)} is not a DNS name.",
            "Write a host name such as shop.example, without scheme, port, path or trailing dot.",
            "PAP-3.1-02",
        )
    elif not domains_equal(domain, served_host):
        findings.error(
            _C.DOMAIN_MISMATCH,
            "/organization/domain",
            f"organization.domain is {excerpt(domain)} but the document was served by {excerpt(served_host)}.",
            _domain_hint(domain, served_host),
            "PAP-3.1-02",
        )


def _domain_hint(domain: str, served_host: str) -> str:
    named, host = domain.lower(), served_host.lower()
    if host == "www." + named or named == "www." + host:
        return (
            "www. is a different host: serve the document for "
            f"{excerpt(domain)} from that host itself (a redirect to it is fine), "
            "and give the other host its own document naming itself."
        )
    return (
        "A document speaks only for the host that finally served it. Publish it on "
        f"{excerpt(domain)} itself; a copy or redirect target on another host cannot speak for it."
    )


def _auth_missing(findings: Findings, pointer: str, what: str, requirement: str) -> None:
    findings.error(
        _C.AUTH_MISSING,
        pointer,
        f"{what} is offered but the document has no auth.",
        "Add auth with the issuer: agents need a Session Token for it.",
        requirement,
    )


def _check_agent(agent: object, findings: Findings, has_auth: bool) -> None:
    if agent is None:
        return
    if not has_auth:
        _auth_missing(findings, "/agent", "agent", "PAP-4.3-01")
    protocols = agent.get("protocols") if isinstance(agent, dict) else None
    if not isinstance(protocols, list) or not protocols:
        findings.error(
            _C.INVALID_FIELD,
            "/agent/protocols",
            "agent.protocols must be a non-empty array.",
            'List {"type": "poppy", "endpoint": "https://..."}.',
            "PAP §7",
        )
        return
    for index, entry in enumerate(protocols):
        pointer = json_pointer("agent", "protocols", index)
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or not entry["type"]:
            findings.error(
                _C.INVALID_FIELD,
                pointer,
                "Each agent protocol needs a type and an endpoint.",
                'Write {"type": "poppy", "endpoint": "https://..."}.',
                "PAP §7",
            )
            continue
        check_https_url(findings, entry.get("endpoint"), pointer + "/endpoint")


def _check_apis(apis: object, findings: Findings, has_auth: bool) -> None:
    if apis is None:
        return
    if not isinstance(apis, list):
        findings.error(
            _C.INVALID_FIELD, "/apis", "apis must be an array.", "List {type, url, description} objects.", "PAP §6"
        )
        return
    if apis and not has_auth:
        _auth_missing(findings, "/apis", "apis", "PAP-6-03")
    for index, api in enumerate(apis):
        pointer = json_pointer("apis", index)
        if not isinstance(api, dict):
            findings.error(
                _C.INVALID_FIELD, pointer, "Each API must be an object.", "Give type, url and description.", "PAP §6"
            )
            continue
        kind = api.get("type")
        if not isinstance(kind, str) or not kind:
            findings.error(
                _C.INVALID_FIELD, pointer + "/type", "API type is missing.", "Use openapi or mcp.", "PAP-6-01"
            )
        elif kind not in _API_TYPES:
            findings.warning(
                _C.UNKNOWN_API_TYPE,
                pointer + "/type",
                f"API type {excerpt(kind)} is not one agents know; they skip this entry.",
                "Use openapi or mcp.",
                "PAP-6-01",
            )
        check_https_url(findings, api.get("url"), pointer + "/url")
        description = api.get("description")
        if not isinstance(description, str) or not description.strip():
            findings.error(
                _C.MISSING_FIELD if description is None else _C.INVALID_FIELD,
                pointer + "/description",
                "API description must be a non-empty string.",
                "Say what the API is for in a sentence.",
                "PAP §6",
            )


def _check_web(web: object, findings: Findings, has_auth: bool) -> None:
    if web is None:
        return
    if not isinstance(web, dict):
        findings.error(_C.INVALID_FIELD, "/web", "web must be an object.", 'Write "web": {}.', "PAP §5")
        return
    endpoint = web.get("browser_session_endpoint")
    if endpoint is None:
        return
    check_https_url(findings, endpoint, "/web/browser_session_endpoint")
    if not has_auth:
        _auth_missing(findings, "/web/browser_session_endpoint", "web.browser_session_endpoint", "PAP-5-08")


def _check_feedback(feedback: object, findings: Findings, has_auth: bool, profile: Profile | None) -> None:
    if feedback is None:
        return
    if not has_auth:
        _auth_missing(findings, "/feedback", "feedback", "PAP-8-01")
    if profile is not None and not profile.feedback_endpoint:
        findings.warning(
            _C.INVALID_FIELD,
            "/feedback",
            f"Protocol {profile.protocol_version} has no feedback endpoint; agents ignore it.",
            "Remove feedback or publish a version that defines it.",
            "PAP §8",
        )
    endpoint = feedback.get("endpoint") if isinstance(feedback, dict) else None
    if endpoint is None:
        findings.error(
            _C.MISSING_FIELD,
            "/feedback/endpoint",
            "feedback needs an endpoint.",
            'Write "feedback": {"endpoint": "https://..."}.',
            "PAP-8-01",
        )
    else:
        check_https_url(findings, endpoint, "/feedback/endpoint")


def _check_extensions(extensions: object, findings: Findings, profile: Profile | None) -> None:
    if extensions is None:
        return
    if not isinstance(extensions, dict):
        findings.error(
            _C.INVALID_FIELD,
            "/extensions",
            "extensions must be an object keyed by extension name.",
            'Write "extensions": {"operations": {"version": "1", ...}}.',
            "PAP §3.3",
        )
        return
    for name, descriptor in extensions.items():
        pointer = json_pointer("extensions", name)
        if extension_name_kind(name) is ExtensionNameKind.INVALID:
            findings.warning(
                _C.INVALID_EXTENSION_NAME,
                pointer,
                f"Extension name {excerpt(name)} is neither a protocol name nor domain-prefixed; agents ignore it.",
                "Name your own extensions under a domain you control, such as example.com/gift-wrap.",
                "PAP-3.3-01",
            )
            continue
        version = descriptor.get("version") if isinstance(descriptor, dict) else None
        if not isinstance(descriptor, dict) or not isinstance(version, str) or not version.isdecimal():
            findings.warning(
                _C.INVALID_EXTENSION,
                pointer,
                "The extension has no version string; agents ignore it.",
                'Give it a major version as a string, such as "version": "1".',
                "PAP §3.3",
            )
            continue
        _check_extension_urls(descriptor, pointer, findings)
        if name == OPERATIONS_EXTENSION:
            _check_operations(descriptor, version, pointer, findings, profile)


def _check_extension_urls(descriptor: Mapping[str, object], pointer: str, findings: Findings) -> None:
    for member, value in descriptor.items():
        if isinstance(value, str) and value[:5].lower() == "http:":
            findings.error(
                _C.NOT_HTTPS,
                pointer + json_pointer(member),
                f"{pointer + json_pointer(member)} is an http:// URL.",
                "Every URL the protocol or an extension exchanges is https.",
                "PAP-3-05",
            )


def _check_operations(
    descriptor: Mapping[str, object], version: str, pointer: str, findings: Findings, profile: Profile | None
) -> None:
    supported = profile.operations_versions if profile is not None else frozenset[str]()
    if supported and version not in supported:
        findings.warning(
            _C.UNSUPPORTED_EXTENSION_VERSION,
            pointer + "/version",
            f"Operations version {excerpt(version)} is not one agents of this profile use; they ignore it.",
            "Publish version " + ", ".join(sorted(supported)) + ".",
            "PAP-3.3-02",
        )
        return
    if descriptor.get("endpoint") is None:
        findings.error(
            _C.MISSING_FIELD,
            pointer + "/endpoint",
            "The Operations extension needs an endpoint.",
            "Set endpoint to the https URL operations are read and confirmed at.",
            "OPS-2-01",
        )
    elif not isinstance(descriptor["endpoint"], str) or descriptor["endpoint"][:5].lower() != "http:":
        check_https_url(findings, descriptor["endpoint"], pointer + "/endpoint")
