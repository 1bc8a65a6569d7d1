"""Generates the ``poppy.json`` a company publishes on one of its domains (PAP §3).

One :class:`DiscoveryInputs` describes a tenant; only ``domain`` changes from one domain
to the next, so every document names the same issuer with the same ``auth``
(PAP-3.2-06). Only the parts the tenant enabled appear. The result is checked with the
same rules an agent applies before it is returned, so Frontdoor never hands out a document
an agent would refuse.
"""

from __future__ import annotations

from typing import Any

import msgspec

from frontdoor_protocol.discovery_check import check_discovery_document
from frontdoor_protocol.discovery_document import (
    ApiListing,
    Auth,
    CompanyAgent,
    ConversationProtocol,
    DiscoveryDocument,
    ExtensionDescriptor,
    Feedback,
    Organization,
    Web,
)
from frontdoor_protocol.extension_name import OPERATIONS_EXTENSION
from frontdoor_protocol.finding import Finding, FindingCode, Findings, json_pointer
from frontdoor_protocol.profile import profile_for
from frontdoor_protocol.scopes import custom_scope_problem

__all__ = ["DiscoveryInputs", "InvalidDiscoveryInputs", "build_discovery_document"]

_CONVERSATION_PROTOCOL = "poppy"
_SCOPE_PROBLEMS = {
    "syntax": "is not an OAuth scope-token",
    "too_long": "is too long",
    "reserved": "uses the poppy: prefix, which belongs to the protocol",
    "no_description": "has no description",
}


class DiscoveryInputs(msgspec.Struct, frozen=True, kw_only=True):
    """What a tenant has enabled, plus the domain one document is for.

    Attributes:
        organization_name: The company's name as users know it (PAP-4.6-03).
        domain: The domain this document is served on (PAP-3.1-02).
        auth: The issuer and its sign-in types; the same value for every domain (PAP-3.2-06).
        conversation_endpoint: The PAP conversation endpoint, when the company has an agent.
        apis: The OpenAPI descriptions and MCP servers offered to agents (PAP §6).
        browser_session_endpoint: Where agents join a browser to a Session (PAP §5).
        website: Whether to publish ``web`` even without a browser session endpoint.
        feedback_endpoint: Where agents send feedback reports (PAP §8).
        operations_endpoint: The Operations extension endpoint; ``None`` leaves it off.
        protocol_version: The profile the tenant publishes (``protocol.published``); the
            document names it and leaves out what it retired (``auth.mediated`` in 1.0).
        allow_http_loopback: Development only: tolerate ``http://`` loopback URLs (the
            inputs were validated upstream); agents will refuse such a document.
    """

    organization_name: str
    domain: str
    auth: Auth
    conversation_endpoint: str | None = None
    apis: tuple[ApiListing, ...] = ()
    browser_session_endpoint: str | None = None
    website: bool = False
    feedback_endpoint: str | None = None
    operations_endpoint: str | None = None
    protocol_version: str = "0.2"
    allow_http_loopback: bool = False


class InvalidDiscoveryInputs(ValueError):
    """The inputs would produce a document agents refuse or the protocol forbids.

    Attributes:
        findings: What is wrong, with JSON Pointers into the document that would result.
    """

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__("discovery inputs do not make a valid poppy.json: " + ", ".join(f.code for f in findings))
        self.findings = findings


def build_discovery_document(inputs: DiscoveryInputs) -> dict[str, Any]:
    """The ``poppy.json`` for ``inputs.domain``, ready to encode.

    Args:
        inputs: The tenant's settings and the domain.

    Returns:
        The document as plain JSON values, members absent when not enabled.

    Raises:
        InvalidDiscoveryInputs: If any check of the result fails, warnings included.
        UnsupportedProtocolVersion: If ``inputs.protocol_version`` has no profile.
    """
    profile = profile_for(inputs.protocol_version)
    findings = Findings()
    if inputs.feedback_endpoint is not None and not profile.feedback_endpoint:
        findings.error(
            FindingCode.INVALID_FIELD,
            "/feedback",
            f"Protocol {profile.protocol_version} has no feedback endpoint.",
            "Turn feedback off for this tenant.",
            "PAP §8",
        )
    for name, description in (inputs.auth.custom_scopes or {}).items():
        problem = custom_scope_problem(name, description)
        if problem is not None:
            findings.error(
                FindingCode.INVALID_FIELD,
                json_pointer("auth", "custom_scopes", name),
                f"Custom scope {_SCOPE_PROBLEMS[problem]}.",
                "Choose a scope-token outside poppy: and describe it for users.",
                "PAP-4.4-03",
            )
    auth = inputs.auth
    if not profile.mediated_sign_in and auth.mediated is not None:
        # 1.0 retired auth.mediated; Mediated Sign-In is a separately advertised extension [S §1, §5].
        auth = msgspec.structs.replace(auth, mediated=None)
    web = None
    if inputs.browser_session_endpoint is not None or inputs.website:
        web = Web(browser_session_endpoint=inputs.browser_session_endpoint)
    document = DiscoveryDocument(
        protocol_version=profile.protocol_version,
        organization=Organization(name=inputs.organization_name, domain=inputs.domain),
        auth=auth,
        agent=_agent(inputs.conversation_endpoint),
        apis=inputs.apis or None,
        web=web,
        feedback=Feedback(endpoint=inputs.feedback_endpoint) if inputs.feedback_endpoint else None,
        extensions=_extensions(inputs.operations_endpoint, max(profile.operations_versions, key=int)),
    )
    # Through JSON so the result holds lists, exactly what an agent will decode.
    built: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(document))
    checked = check_discovery_document(built, inputs.domain)
    if inputs.allow_http_loopback:
        checked = [f for f in checked if f.code != FindingCode.NOT_HTTPS]
    findings.extend(checked)
    if findings:
        raise InvalidDiscoveryInputs(findings)
    return built


def _agent(endpoint: str | None) -> CompanyAgent | None:
    if endpoint is None:
        return None
    return CompanyAgent(protocols=(ConversationProtocol(type=_CONVERSATION_PROTOCOL, endpoint=endpoint),))


def _extensions(operations_endpoint: str | None, version: str) -> dict[str, ExtensionDescriptor] | None:
    if operations_endpoint is None:
        return None
    return {OPERATIONS_EXTENSION: ExtensionDescriptor(version=version, endpoint=operations_endpoint)}
