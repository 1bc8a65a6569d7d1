"""What a document check reports: one :class:`Finding` per problem.

Checks never raise on a bad document; they return findings so a dashboard can show every
problem at once, each with a stable ``code`` a program can branch on and a ``hint`` a
person can act on. Messages never quote more than a short excerpt of the checked document.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Final

import msgspec

__all__ = ["Finding", "FindingCode", "Findings", "Severity", "excerpt", "has_errors", "json_pointer", "json_type_name"]

_EXCERPT_LIMIT: Final = 64


class Severity(StrEnum):
    """How much a finding matters."""

    ERROR = "error"
    """A personal agent refuses the document, or the company breaks a MUST."""
    WARNING = "warning"
    """Agents still work with the document, but something is ignored or a SHOULD is missed."""


class FindingCode(StrEnum):
    """Stable codes for findings, shared by every check."""

    NOT_OBJECT = "not_object"
    MISSING_FIELD = "missing_field"
    INVALID_FIELD = "invalid_field"
    NOT_HTTPS = "not_https"
    UNSUPPORTED_VERSION = "unsupported_version"
    DOMAIN_MISMATCH = "domain_mismatch"
    AUTH_MISSING = "auth_missing"
    NOTHING_OFFERED = "nothing_offered"
    UNKNOWN_API_TYPE = "unknown_api_type"
    INVALID_EXTENSION_NAME = "invalid_extension_name"
    INVALID_EXTENSION = "invalid_extension"
    UNSUPPORTED_EXTENSION_VERSION = "unsupported_extension_version"
    UNDESCRIBED_SCOPE = "undescribed_scope"
    ISSUER_MISMATCH = "issuer_mismatch"
    NOT_LISTED = "not_listed"
    ES256_MISSING = "es256_missing"
    SYMMETRIC_ALGORITHM = "symmetric_algorithm"
    AUTH_METHOD_MISSING = "auth_method_missing"
    PKCE_S256_MISSING = "pkce_s256_missing"
    PKCE_PLAIN_OFFERED = "pkce_plain_offered"
    ISS_PARAMETER_MISSING = "iss_parameter_missing"
    GRANT_TYPE_MISSING = "grant_type_missing"
    # PAP 1.0 paired discovery [S §2]: poppy.json, protected-resource and AS metadata.
    RESOURCE_MISMATCH = "resource_mismatch"
    ISSUER_NOT_AUTHORIZATION_SERVER = "issuer_not_authorization_server"
    ISSUER_AMBIGUOUS = "issuer_ambiguous"
    RESOURCE_NOT_PROTECTED = "resource_not_protected"


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One problem found in a checked document.

    Attributes:
        code: Stable snake_case code.
        severity: ``error`` or ``warning``.
        message: What is wrong, for a person; never more than a short excerpt of input.
        hint: How to fix it.
        requirement: The requirement ID (``PAP-3.1-02``), or the RFC section when the rule
            comes from an RFC the protocol builds on (``RFC 8414 §2``).
        pointer: RFC 6901 JSON Pointer to the member concerned (``""`` is the document).
    """

    code: FindingCode
    severity: Severity
    message: str
    hint: str
    requirement: str
    pointer: str = ""

    @property
    def is_error(self) -> bool:
        """Whether this finding makes the document unusable or non-conforming."""
        return self.severity is Severity.ERROR


class Findings(list[Finding]):
    """A list of findings with shorthands for adding one; what each check builds."""

    def error(self, code: FindingCode, pointer: str, message: str, hint: str, requirement: str) -> None:
        """Add an error finding."""
        self.append(
            Finding(
                code=code,
                severity=Severity.ERROR,
                message=message,
                hint=hint,
                requirement=requirement,
                pointer=pointer,
            )
        )

    def warning(self, code: FindingCode, pointer: str, message: str, hint: str, requirement: str) -> None:
        """Add a warning finding."""
        self.append(
            Finding(
                code=code,
                severity=Severity.WARNING,
                message=message,
                hint=hint,
                requirement=requirement,
                pointer=pointer,
            )
        )


def has_errors(findings: Iterable[Finding]) -> bool:
    """Whether any finding is an error."""
    return any(finding.is_error for finding in findings)


def excerpt(value: object, limit: int = _EXCERPT_LIMIT) -> str:
    """A short, printable, quoted rendering of an untrusted value for a message.

    Args:
        value: Anything taken from a checked document.
        limit: Most characters of the value kept.

    Returns:
        The value's ``repr`` cut to ``limit`` characters, with an ellipsis when cut.
    """
    if isinstance(value, str):
        shown = value[:limit]
        text = repr(shown)
        return text if len(value) <= limit else text + "…"
    if isinstance(value, bool | int | float) or value is None:
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "…"
    return f"a JSON {_json_type(value)}"


def _json_type(value: object) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "value"


def json_pointer(*parts: str | int) -> str:
    """An RFC 6901 JSON Pointer to a member; over-long member names are cut.

    Args:
        *parts: Member names and array indexes, outermost first.

    Returns:
        The pointer, for example ``/extensions/example.com~1gift-wrap/version``.
    """
    tokens = []
    for part in parts:
        token = str(part)
        if len(token) > _EXCERPT_LIMIT:
            token = token[:_EXCERPT_LIMIT] + "…"
        tokens.append(token.replace("~", "~0").replace("/", "~1"))
    return "".join("/" + token for token in tokens)


def json_type_name(value: object) -> str:
    """The JSON type name of a decoded value, for messages (``string``, ``array``...)."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return _json_type(value)
