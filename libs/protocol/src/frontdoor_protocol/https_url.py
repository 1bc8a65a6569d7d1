"""The one rule for URLs: every URL the protocol defines or exchanges is HTTPS (PAP-3-05).

A URL here is an absolute ``https`` URL with a host, no user information (credentials in a
URL leak into logs), no fragment (RFC 6749 §3.1 and RFC 8414 §2 forbid it on endpoints and
issuers) and no whitespace or control characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final
from urllib.parse import urlsplit

from frontdoor_protocol.finding import FindingCode, Findings

__all__ = [
    "LOOPBACK_HOSTS",
    "MAX_URL_LENGTH",
    "UrlProblem",
    "check_https_url",
    "host_of",
    "https_url_problem",
    "is_loopback_http_url",
]

MAX_URL_LENGTH: Final = 2048
"""Longest URL accepted anywhere in a protocol document."""
LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts whose ``http://`` URLs development setups may use."""


class UrlProblem(StrEnum):
    """Why a value is not a usable protocol URL."""

    NOT_STRING = "not_string"
    TOO_LONG = "too_long"
    MALFORMED = "malformed"
    NOT_HTTPS = "not_https"
    HAS_USERINFO = "has_userinfo"
    HAS_FRAGMENT = "has_fragment"


def https_url_problem(value: object) -> UrlProblem | None:
    """What is wrong with ``value`` as a protocol URL, or ``None`` when it is fine.

    Args:
        value: Anything, typically a decoded JSON member.

    Returns:
        ``None`` for a usable HTTPS URL, else the first problem found (PAP-3-05).
    """
    if not isinstance(value, str):
        return UrlProblem.NOT_STRING
    if len(value) > MAX_URL_LENGTH:
        return UrlProblem.TOO_LONG
    if not value.isprintable() or any(char.isspace() for char in value):
        return UrlProblem.MALFORMED
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises on a port that is not a number in range
    except ValueError:
        return UrlProblem.MALFORMED
    if parts.scheme != "https":
        # urlsplit lowers the scheme: "HTTPS://" is https, "http://" is not.
        return UrlProblem.NOT_HTTPS if parts.scheme else UrlProblem.MALFORMED
    if not parts.hostname:
        return UrlProblem.MALFORMED
    if "@" in parts.netloc:
        return UrlProblem.HAS_USERINFO
    if parts.fragment or value.endswith("#"):
        return UrlProblem.HAS_FRAGMENT
    return None


def host_of(url: str) -> str | None:
    """The host of a URL, lower-cased as ``urlsplit`` gives it, or ``None``.

    Args:
        url: Any URL string.

    Returns:
        The host name without port or brackets, or ``None`` when there is none.
    """
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


_URL_MESSAGES: Final[Mapping[UrlProblem, str]] = {
    UrlProblem.NOT_STRING: "must be a URL string",
    UrlProblem.TOO_LONG: "is longer than any URL Frontdoor accepts",
    UrlProblem.MALFORMED: "is not an absolute URL",
    UrlProblem.NOT_HTTPS: "is not an https:// URL",
    UrlProblem.HAS_USERINFO: "carries user information before the host",
    UrlProblem.HAS_FRAGMENT: "has a #fragment",
}


def check_https_url(findings: Findings, value: object, pointer: str, requirement: str = "PAP-3-05") -> bool:
    """Report ``value`` unless it is a usable HTTPS URL (PAP-3-05, PAP-3-06).

    Args:
        findings: Where to add the finding.
        value: The member's value.
        pointer: JSON Pointer to it.
        requirement: The requirement to cite.

    Returns:
        Whether the URL is usable.
    """
    problem = https_url_problem(value)
    if problem is None:
        return True
    code = FindingCode.NOT_HTTPS if problem is UrlProblem.NOT_HTTPS else FindingCode.INVALID_FIELD
    findings.error(
        code,
        pointer,
        f"{pointer or 'The value'} {_URL_MESSAGES[problem]}.",
        "Use an absolute https:// URL with a host, without user:password@ or a #fragment.",
        requirement,
    )
    return False


def is_loopback_http_url(value: str) -> bool:
    """Whether ``value`` is an ``http://`` URL on a loopback host (development only).

    Args:
        value: A URL.

    Returns:
        ``True`` for ``http://localhost…``, ``http://127.0.0.1…`` and ``http://[::1]…``.
    """
    try:
        parts = urlsplit(value)
        return parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS
    except ValueError:
        return False
