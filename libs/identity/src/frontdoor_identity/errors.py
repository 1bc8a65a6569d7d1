"""Why a personal agent's identity could not be established: one error, stable reasons.

The token endpoint answers every `ClientResolutionError` with ``invalid_client`` (RFC 6749
§5.2); the reason is for logs, metrics and the dashboard, never for the response body.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from frontdoor_core.outbound import FetchErrorCode

__all__ = ["ClientResolutionError", "InvalidClientMetadata", "ResolutionReason", "Stage"]

Stage = Literal["client_id", "client_metadata", "jwks"]
"""Which step failed: the ``client_id`` itself, its metadata document, or its JWKS."""


class ResolutionReason(StrEnum):
    """Reasons of Frontdoor's own checks; fetch failures carry a `FetchErrorCode` instead."""

    INVALID_CLIENT_ID = "invalid_client_id"
    """The client_id is not an HTTPS URL without fragment or credentials (PAP-4.1-01, PAP-3-05)."""
    CLIENT_ID_REDIRECTED = "client_id_redirected"
    """The document was not served at the client_id URL itself (PAP-4.1-02)."""
    MALFORMED_JSON = "malformed_json"
    """The body is not strict UTF-8 JSON (GUIDE-json-01)."""
    DUPLICATE_MEMBER = "duplicate_member"
    """An object repeats a member name (GUIDE-json-01)."""
    NOT_OBJECT = "not_object"
    """The document is not a JSON object."""
    MISSING_FIELD = "missing_field"
    """A required member (client_id, client_name, jwks_uri) is absent."""
    INVALID_FIELD = "invalid_field"
    """A member has the wrong JSON type or an unusable value."""
    CLIENT_ID_MISMATCH = "client_id_mismatch"
    """The document's client_id differs from the URL it was fetched from (PAP-4.1-02)."""
    JWKS_URI_NOT_HTTPS = "jwks_uri_not_https"
    """jwks_uri is not an HTTPS URL (PAP-4.1-03)."""
    JWKS_URI_OTHER_DOMAIN = "jwks_uri_other_domain"
    """jwks_uri, or a redirect while fetching it, leaves the client_id's host (PAP-4.1-03)."""
    REDIRECT_URI_NOT_HTTPS = "redirect_uri_not_https"
    """A redirect_uris entry is not an HTTPS URL (PAP-4.1-03)."""
    REDIRECT_URI_OTHER_DOMAIN = "redirect_uri_other_domain"
    """A redirect_uris entry is on another host than the client_id (PAP-4.1-03)."""
    LOGO_URI_NOT_HTTPS = "logo_uri_not_https"
    """logo_uri is present but not an HTTPS URL (PAP-3-05)."""
    UNSUPPORTED_AUTH_METHOD = "unsupported_auth_method"
    """token_endpoint_auth_method is present and not ``private_key_jwt`` (PAP §3.2)."""
    PRIVATE_KEY_PUBLISHED = "private_key_published"
    """The JWKS holds private or symmetric key material: nothing in it can be trusted."""
    NO_USABLE_KEYS = "no_usable_keys"
    """The JWKS has no public signing key Frontdoor can verify with."""


class ClientResolutionError(Exception):
    """A client_id could not be resolved to verified metadata and keys.

    Attributes:
        reason: A `ResolutionReason`, or the `FetchErrorCode` of a refused or failed
            fetch (``blocked_address``, ``not_json``, ``timeout``...). Both are string
            enums: compare with either or with the plain string.
        stage: Which step failed.
        requirement: The requirement ID the refusal enforces, when there is one.
    """

    def __init__(
        self,
        reason: ResolutionReason | FetchErrorCode,
        stage: Stage,
        *,
        requirement: str | None = None,
    ) -> None:
        super().__init__(f"{stage}: {reason.value}")
        self.reason = reason
        self.stage = stage
        self.requirement = requirement

    def copy(self) -> ClientResolutionError:
        """A fresh instance with the same type and fields (to raise again without a traceback)."""
        return type(self)(self.reason, self.stage, requirement=self.requirement)


class InvalidClientMetadata(ClientResolutionError):
    """The metadata document or the JWKS breaks a protocol rule (the fetch itself worked)."""
