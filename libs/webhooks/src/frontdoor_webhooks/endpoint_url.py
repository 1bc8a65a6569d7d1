"""Which URLs a webhook endpoint may have.

HTTPS only, as the protocol requires everywhere; plain ``http`` only to a loopback host
and only when the caller passes ``allow_insecure`` (development). No user information
(credentials would sit in the database and the dashboard in clear), no fragment, and a
bounded length. Then the fetcher's own rules (`frontdoor_core.outbound.check_target`):
a URL the deliverer would refuse is refused here, at registration, rather than accepted
and never delivered. A host that is an IP address in any spelling a browser or resolver
accepts (``127.1``, ``2130706433``, ``0x7f000001``, ``0177.0.0.1``, a trailing dot,
fullwidth digits, IPv4-mapped IPv6, ``localhost``) must be public (``url_not_public``)
unless ``FRONTDOOR_WEBHOOK_ALLOWLIST`` lets it through; non-canonical spellings of public
addresses are ``invalid_url``. Whether a host *name* resolves to a public address is
checked at delivery time, on the address actually connected to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from frontdoor_core.errors import Invalid
from frontdoor_core.outbound import (
    MAX_URL_LENGTH,
    AddressRules,
    FetchError,
    FetchErrorCode,
    OutboundPolicy,
    check_target,
    is_loopback_host,
)

__all__ = ["validate_endpoint_url"]

_UNSAFE_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


# The fetcher's messages, as reasons for the form field (never echoing the host back).
_REASONS = {
    "host is a non-canonical IP address form": "the host is an IP address in a non-canonical form",
    "host is not a valid DNS name": "the host is not a valid DNS name (no trailing dot, no percent-encoding)",
    "host is not ASCII": "the host is not a valid DNS name",
    "unparsable URL": "cannot be parsed",
    "IPv6 zone identifiers are not accepted": "must not carry an IPv6 zone identifier",
}


def _invalid(reason: str) -> Invalid:
    return Invalid("invalid_url", f"The endpoint URL is not acceptable: {reason}.", fields={"url": reason})


def validate_endpoint_url(url: str, *, allow_insecure: bool = False, allowlist: Sequence[str] = ()) -> str:
    """Check an endpoint URL and return it stripped of surrounding whitespace.

    Args:
        url: The URL as the company gave it.
        allow_insecure: Accept ``http://`` to loopback hosts (development only).
        allowlist: ``FRONTDOOR_WEBHOOK_ALLOWLIST``: networks and host names a webhook may
            reach although they are not public (never the agent-fetch allowlist).

    Returns:
        The URL to store.

    Raises:
        Invalid: ``invalid_url`` with the reason in ``fields["url"]``, or
            ``url_not_public`` when the host is a non-public address.
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
    rules = AddressRules(OutboundPolicy(allow_http_loopback=allow_insecure, allowlist=tuple(allowlist)))
    try:
        check_target(text, rules, allow_http_loopback=allow_insecure, redirect=False)
    except FetchError as exc:
        if exc.code is FetchErrorCode.BLOCKED_ADDRESS:
            raise Invalid("url_not_public", "The endpoint URL can never be delivered to: its host is not a public"
                          " address (loopback, private, link-local or reserved, however it is written).",
                          fields={"url": "not a public address"}) from None
        if exc.code is FetchErrorCode.NOT_HTTPS:
            raise _invalid("must use https") from None
        raise _invalid(_REASONS.get(exc.message.split(" (", 1)[0], "is not a URL Frontdoor can deliver to")) from None
    return text
