"""The one failure type of an outbound fetch, with a closed set of stable codes."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FetchError", "FetchErrorCode"]


class FetchErrorCode(StrEnum):
    """Why an outbound fetch was refused or failed.

    The values are stable: callers branch on them and map them to protocol errors
    (for example ``invalid_client`` when an agent's metadata cannot be fetched).
    """

    NOT_HTTPS = "not_https"
    BAD_URL = "bad_url"
    BLOCKED_ADDRESS = "blocked_address"
    MIXED_ANSWERS = "mixed_answers"
    DNS_ERROR = "dns_error"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    REDIRECT_NOT_HTTPS = "redirect_not_https"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"
    TLS_ERROR = "tls_error"
    BAD_STATUS = "bad_status"
    NOT_JSON = "not_json"
    HTTP_ERROR = "http_error"
    TARGET_BUSY = "target_busy"
    """The caller's own per-host request budget refused the fetch; nothing was sent."""


class FetchError(Exception):
    """An outbound fetch failed; ``code`` says why.

    Attributes:
        code: The stable reason, a `FetchErrorCode` (compares equal to its string).
        message: A human sentence for logs. It may name the host but never carries
            response bodies or credentials.
        status: The HTTP status of the final response for ``bad_status``, else None.
    """

    def __init__(self, code: FetchErrorCode, message: str, *, status: int | None = None) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.status = status
