"""The ``poppy.json`` discovery document of profile 0.2, as wire structs (PAP §3).

A company publishes one document per domain at ``https://{domain}/.well-known/poppy.json``
(PAP-3-01). Every member is optional except ``protocol_version`` and ``organization``;
absent members are omitted, never ``null``. Decoding with these structs ignores members
they do not know, as agents must (PAP-3.3-02..05).
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

__all__ = [
    "ApiListing",
    "ApiType",
    "Auth",
    "CompanyAgent",
    "ConversationProtocol",
    "DiscoveryDocument",
    "ExtensionDescriptor",
    "Feedback",
    "MediatedField",
    "MediatedSignIn",
    "Organization",
    "SignInOffer",
    "Web",
    "discovery_url",
]


class ApiType(StrEnum):
    """The API types a company may list (PAP-6-01)."""

    OPENAPI = "openapi"
    MCP = "mcp"


class Organization(msgspec.Struct, frozen=True, kw_only=True):
    """Who the company is (PAP §3.1).

    Attributes:
        name: Shown to users whenever an agent asks them to sign in or approve
            (PAP-4.6-03, PAP-4.7-07).
        domain: The host that serves this document, exactly (PAP-3.1-02).
    """

    name: str
    domain: str


class SignInOffer(msgspec.Struct, frozen=True, kw_only=True):
    """Direct (PAP §4.5) or Device (PAP §4.6) Sign-In, with the scopes it can grant."""

    scopes: tuple[str, ...]


class MediatedField(msgspec.Struct, frozen=True, kw_only=True):
    """One credential field an agent collects for Mediated Sign-In (PAP §4.7).

    Attributes:
        name: The member name the endpoint expects.
        label: What the user is shown.
        secret: Whether the agent must protect the value (PAP-4.7-01).
    """

    name: str
    label: str
    secret: bool


class MediatedSignIn(msgspec.Struct, frozen=True, kw_only=True):
    """Mediated Sign-In (PAP §4.7): where credentials go, which, and the scopes offered."""

    endpoint: str
    fields: tuple[MediatedField, ...]
    scopes: tuple[str, ...]


class Auth(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The ``auth`` member: the issuer and the sign-in types it offers (PAP §3.2, §4.4).

    Identical in every document that names the issuer (PAP-3.2-06).
    """

    issuer: str
    direct: SignInOffer | None = None
    device: SignInOffer | None = None
    mediated: MediatedSignIn | None = None
    custom_scopes: dict[str, str] | None = None


class ConversationProtocol(msgspec.Struct, frozen=True, kw_only=True):
    """One way to talk to the company's agent; ``poppy`` is PAP §7."""

    type: str
    endpoint: str


class CompanyAgent(msgspec.Struct, frozen=True, kw_only=True):
    """The ``agent`` member: the company's own agent and how to reach it."""

    protocols: tuple[ConversationProtocol, ...]


class ApiListing(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of ``apis`` (PAP §6).

    Attributes:
        type: ``openapi`` or ``mcp`` (PAP-6-01).
        url: The OpenAPI description, or the MCP server's URL (the ``resource`` a token is
            requested for, PAP-4.3-09).
        description: What the API is for, for the agent's model and for people.
    """

    type: str
    url: str
    description: str


class Web(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The ``web`` member: the company's website for agents' browsers (PAP §5)."""

    browser_session_endpoint: str | None = None


class Feedback(msgspec.Struct, frozen=True, kw_only=True):
    """The ``feedback`` member: where agents report tasks they could not do (PAP §8)."""

    endpoint: str


class ExtensionDescriptor(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of ``extensions`` (PAP §3.3); Operations v1 adds ``endpoint``."""

    version: str
    endpoint: str | None = None


class DiscoveryDocument(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A whole ``poppy.json`` (PAP §3.1)."""

    protocol_version: str
    organization: Organization
    auth: Auth | None = None
    agent: CompanyAgent | None = None
    apis: tuple[ApiListing, ...] | None = None
    web: Web | None = None
    feedback: Feedback | None = None
    extensions: dict[str, ExtensionDescriptor] | None = None


def discovery_url(domain: str, path: str = "/.well-known/poppy.json") -> str:
    """Where a domain's document is published (PAP-3-01).

    Args:
        domain: The company's domain, or a subdomain it controls.
        path: The profile's ``discovery_path``.

    Returns:
        ``https://{domain}{path}``.
    """
    return f"https://{domain}{path}"
