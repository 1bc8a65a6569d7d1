"""The token endpoint's request, parsed from the form once (RFC 6749 §3.2)."""

from __future__ import annotations

import msgspec

__all__ = ["AUTHORIZATION_CODE", "CLIENT_ASSERTION_TYPE", "DEVICE_CODE", "JWT_BEARER", "REFRESH_TOKEN", "TokenRequest"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
REFRESH_TOKEN = "refresh_token"
AUTHORIZATION_CODE = "authorization_code"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class TokenRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Form parameters of a token request plus the request's DPoP headers.

    Attributes:
        dpop: every ``DPoP`` header value (exactly one is valid where DPoP applies).
        client_address: the network the request came from (rate limits).
    """

    grant_type: str | None = None
    client_id: str | None = None
    client_assertion_type: str | None = None
    client_assertion: str | None = None
    assertion: str | None = None
    session_id: str | None = None
    resource: str | None = None
    scope: str | None = None
    device_code: str | None = None
    refresh_token: str | None = None
    code: str | None = None
    code_verifier: str | None = None
    redirect_uri: str | None = None
    dpop: tuple[str, ...] = ()
    client_address: str = "unknown"
