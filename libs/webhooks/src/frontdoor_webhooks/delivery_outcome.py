"""What one delivery attempt's outcome means: delivered, retry, endpoint gone, or abort.

Only a 2xx is a delivery. Everything else is retried on the schedule, 4xx included (a
receiver's misconfiguration is usually fixed within the retry window; Svix does the
same), except:

* ``410 Gone``: the receiver says the endpoint no longer exists, so the endpoint is
  disabled; its messages wait until a company re-enables it.
* a ``webhook-delivery: abort`` response header on a non-2xx: the receiver refuses this
  message for good, so it is not retried (the endpoint stays enabled).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = ["ABORT_HEADER", "ErrorClass", "Verdict", "classify", "status_error_class"]

ABORT_HEADER = "webhook-delivery"


class ErrorClass(StrEnum):
    """Why an attempt failed, as stored in ``webhook_attempts.error_class``."""

    TIMEOUT = "timeout"
    CONNECT = "connect"
    DNS = "dns"
    TLS = "tls"
    BLOCKED_ADDRESS = "blocked_address"
    INVALID_URL = "invalid_url"
    INVALID_RESPONSE = "invalid_response"
    HTTP_3XX = "http_3xx"
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    INTERNAL = "internal"  # Frontdoor could not make the attempt (an unreadable secret, a bug)


class Verdict(StrEnum):
    """What to do with a message after an attempt."""

    DELIVERED = "delivered"
    RETRY = "retry"
    GONE = "gone"
    ABORT = "abort"


def status_error_class(status: int) -> ErrorClass | None:
    """The error class of an HTTP status; None for a 2xx."""
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        return ErrorClass.HTTP_3XX
    if 400 <= status < 500:
        return ErrorClass.HTTP_4XX
    if 500 <= status < 600:
        return ErrorClass.HTTP_5XX
    return ErrorClass.INVALID_RESPONSE


def classify(status: int | None, headers: Mapping[str, str]) -> Verdict:
    """Decide what an attempt's answer means.

    Args:
        status: The HTTP status, or None when no response came (timeout, connect
            error, refused address...).
        headers: Response headers with lower-cased names.

    Returns:
        The verdict.
    """
    if status is None:
        return Verdict.RETRY
    if 200 <= status < 300:
        return Verdict.DELIVERED
    if status == 410:
        return Verdict.GONE
    if headers.get(ABORT_HEADER, "").strip().lower() == "abort":
        return Verdict.ABORT
    return Verdict.RETRY
