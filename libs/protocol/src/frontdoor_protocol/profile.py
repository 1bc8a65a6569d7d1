"""Protocol profiles: what differs between the PAP versions a tenant can publish.

A tenant publishes one ``protocol_version`` in its ``poppy.json``; code looks up the
:class:`Profile` for it once and reads the differences from the value instead of
branching on version strings. Draft 0.2 and 1.0 are served (ADR 0004 §1). 1.0 replaces
the server-issued Session Token by a per-request delegated ``Poppy-Session`` JWT
(``session_credential``), serves protected-resource metadata at the company and retired
``auth.mediated``. Draft 0.1 would differ in ``assertion_audience`` (the token endpoint)
and ``feedback_endpoint``; adding it is a new constant and a registry entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

import msgspec

from frontdoor_protocol.jws_algorithm import REQUIRED_DPOP_ALGORITHM

__all__ = [
    "PROFILES",
    "PROFILE_0_2",
    "PROFILE_1_0",
    "AssertionAudience",
    "Profile",
    "SessionCredential",
    "UnsupportedProtocolVersion",
    "parse_protocol_version",
    "profile_for",
]

_MAJOR_MINOR: Final = re.compile(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})")


class SessionCredential(StrEnum):
    """How an agent proves which Session a request belongs to."""

    SESSION_TOKEN = "session_token"
    """The issuer mints a DPoP-bound Session Token at the token endpoint (0.1, 0.2; PAP §4.2)."""
    DELEGATED_SESSION_JWT = "delegated_session_jwt"
    """The agent signs a ``Poppy-Session`` JWT per request with a delegated key (1.0)."""


class AssertionAudience(StrEnum):
    """What the ``aud`` of client and Session assertions must equal."""

    ISSUER = "issuer"
    """The company's ``auth.issuer``, as one string, compared exactly (PAP-4.1-05, PAP-4.2-07)."""
    TOKEN_ENDPOINT = "token_endpoint"
    """The token endpoint URL (what 0.1 implementations use)."""


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """The rules of one protocol version, as values.

    Attributes:
        protocol_version: The ``major.minor`` a ``poppy.json`` publishes (PAP-3.1-01).
        session_credential: How requests name their Session.
        assertion_audience: What client and Session assertions are addressed to.
        feedback_endpoint: Whether ``poppy.json`` may offer ``feedback`` (PAP §8).
        session_assertion_max_lifetime: Most seconds between ``iat`` and ``exp`` of a
            Session assertion (PAP-4.2-08).
        browser_assertion_max_lifetime: The same for a browser assertion (PAP-5-06).
        required_dpop_algorithm: The DPoP algorithm every company accepts and lists
            (PAP-3.2-09, PAP-3.2-10).
        operations_versions: Versions of the Operations extension served (OPS §2).
        company_protected_resource_metadata: Whether the company itself serves RFC 9728
            metadata (1.0); in 0.2 only an MCP server does (PAP-6-06).
        discovery_path: Where ``poppy.json`` lives on each domain (PAP-3-01).
        mediated_sign_in: Whether ``poppy.json`` may carry ``auth.mediated``; 1.0 retired
            it in favour of a separately advertised extension [S §1, §5].
    """

    protocol_version: str
    session_credential: SessionCredential
    assertion_audience: AssertionAudience
    feedback_endpoint: bool
    session_assertion_max_lifetime: int
    browser_assertion_max_lifetime: int
    required_dpop_algorithm: str
    operations_versions: frozenset[str]
    company_protected_resource_metadata: bool
    discovery_path: str = "/.well-known/poppy.json"
    mediated_sign_in: bool = True

    def assertion_audience_for(self, *, issuer: str, token_endpoint: str) -> str:
        """The only ``aud`` a client or Session assertion may carry under this profile.

        Args:
            issuer: The tenant's ``auth.issuer``, exactly as published.
            token_endpoint: The tenant's token endpoint URL.

        Returns:
            The string ``aud`` must equal, character for character (PAP-4.1-05, PAP-4.2-07).
        """
        if self.assertion_audience is AssertionAudience.ISSUER:
            return issuer
        return token_endpoint


PROFILE_0_2: Final = Profile(
    protocol_version="0.2",
    session_credential=SessionCredential.SESSION_TOKEN,
    assertion_audience=AssertionAudience.ISSUER,
    feedback_endpoint=True,
    session_assertion_max_lifetime=300,
    browser_assertion_max_lifetime=60,
    required_dpop_algorithm=REQUIRED_DPOP_ALGORITHM,
    operations_versions=frozenset({"1"}),
    company_protected_resource_metadata=False,
)
"""Draft 0.2 with the Operations extension v1: the profile Frontdoor serves."""

PROFILE_1_0: Final = Profile(
    protocol_version="1.0",
    session_credential=SessionCredential.DELEGATED_SESSION_JWT,
    assertion_audience=AssertionAudience.ISSUER,
    feedback_endpoint=True,
    session_assertion_max_lifetime=300,
    browser_assertion_max_lifetime=60,
    required_dpop_algorithm=REQUIRED_DPOP_ALGORITHM,
    operations_versions=frozenset({"1"}),
    company_protected_resource_metadata=True,
    mediated_sign_in=False,
)
"""PAP 1.0: per-request delegated ``Poppy-Session`` JWTs and RFC 9068 access tokens
(ADR 0004 §1). "0.3" and "0.4" are not aliases of it until checked against fixtures [Q1].
The assertion lifetimes only bound the client assertions of its OAuth grants."""

PROFILES: Final[Mapping[str, Profile]] = MappingProxyType(
    {profile.protocol_version: profile for profile in (PROFILE_0_2, PROFILE_1_0)}
)
"""Every profile Frontdoor can serve, by ``protocol_version``."""


class UnsupportedProtocolVersion(LookupError):
    """No profile exists for the requested version (PAP-3.1-01)."""


def parse_protocol_version(value: object) -> tuple[int, int] | None:
    """Read a ``protocol_version`` written as ``major.minor`` (PAP-3.1-01).

    Args:
        value: Anything, typically the decoded ``protocol_version`` member.

    Returns:
        ``(major, minor)``, or ``None`` when ``value`` is not a ``major.minor`` string
        (``"0.2.1"``, ``"v0.2"``, ``"02.0"`` and numbers are not).
    """
    if not isinstance(value, str):
        return None
    match = _MAJOR_MINOR.fullmatch(value)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def profile_for(version: str) -> Profile:
    """The profile for a published ``protocol_version``.

    Before 1.0 every minor version may break the one before, so only an exact
    ``major.minor`` match counts (PAP-3.1-01).

    Args:
        version: The ``protocol_version`` value.

    Returns:
        The matching profile.

    Raises:
        UnsupportedProtocolVersion: When Frontdoor has no profile for ``version``.
    """
    profile = PROFILES.get(version)
    if profile is None:
        raise UnsupportedProtocolVersion("no profile for this protocol_version")
    return profile
