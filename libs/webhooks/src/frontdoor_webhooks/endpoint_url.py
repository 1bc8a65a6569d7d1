"""Which URLs a webhook endpoint may have.

HTTPS only, as the protocol requires everywhere; plain ``http`` only to a loopback host
and only when the caller passes ``allow_insecure`` (development). No user information
(credentials would sit in the database and the dashboard in clear), no fragment, and a
bounded length. Whether the host resolves to a public address is checked at delivery
time, on the address actually connected to (`frontdoor_core.outbound`).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from frontdoor_core.errors import Invalid
from frontdoor_core.outbound import MAX_URL_LENGTH, is_loopback_host

__all__ = ["validate_endpoint_url"]

_UNSAFE_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


def _invalid(reason: str) -> Invalid:
    return Invalid("invalid_url", f"The endpoint URL is not acceptable: {reason}.", fields={"url": reason})


def validate_endpoint_url(url: str, *, allow_insecure: bool = False) -> str:
    """Check an endpoint URL and return it stripped of surrounding whitespace.

    Args:
        url: The URL as the company gave it.
        allow_insecure: Accept ``http://`` to loopback hosts (development only).

    Returns:
        The URL to store.

    Raises:
        Invalid: ``invalid_url`` with the reason in ``fields["url"]``.
    """
    text = url.strip()
    if not 12 <= len(text) <= MAX_URL_LENGTH:
        raise _invalid(f"must be 12 to {MAX_URL_LENGTH} characters")
    if _UNSAFE_CHARS.search(text):
        raise _invalid("contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise _invalid("cannot be parsed") from None
    host = parts.hostname or ""
    if parts.scheme not in ("https", "http") or not host:
        raise _invalid("must be an absolute https URL")
    if parts.scheme == "http" and not (allow_insecure and is_loopback_host(host)):
        raise _invalid("must use https")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _invalid("must not contain credentials")
    if parts.fragment or text.endswith("#"):
        raise _invalid("must not have a fragment")
    if port == 0:
        raise _invalid("has an invalid port")
    return text
