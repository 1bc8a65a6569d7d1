"""Validating a URL before Frontdoor requests it: scheme, host shape, credentials."""

from __future__ import annotations

import re

import httpx

from .address import parse_ip
from .address_rules import AddressRules, is_loopback_host
from .browser_host import host_address, url_host
from .fetch_error import FetchError, FetchErrorCode

__all__ = ["MAX_URL_LENGTH", "check_target"]

MAX_URL_LENGTH = 2048

_UNSAFE_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_HOST_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$")
# A last label like "1" or "0x7f" marks a shorthand IPv4 form ("127.1", "0x7f.1",
# "2130706433") that resolvers accept but `ipaddress` does not: never a real DNS name.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")


def _bad(message: str) -> FetchError:
    return FetchError(FetchErrorCode.BAD_URL, message)


def check_target(url: str | httpx.URL, rules: AddressRules, *, allow_http_loopback: bool, redirect: bool) -> httpx.URL:
    """Parse and validate a URL Frontdoor is about to request.

    Only ``https`` is accepted, except plain ``http`` to a loopback host when
    ``allow_http_loopback`` is set (development). User information, shorthand IP
    forms, zone IDs, percent-encoded or trailing-dot hosts are refused. An IP address,
    in whatever spelling a browser or resolver would accept (``127.1``, ``0x7f000001``,
    fullwidth digits, ``localhost``: see `host_address`), must pass the address rules
    here, so such a URL is ``blocked_address`` rather than merely malformed; host names
    are checked at connect time against the addresses actually connected to.

    Args:
        url: The URL as given, or an already joined redirect target.
        rules: The compiled address rules.
        allow_http_loopback: Whether the development exception for http is on.
        redirect: True when ``url`` came from a ``Location`` header; selects the
            ``redirect_not_https`` code over ``not_https``.

    Returns:
        The parsed URL, fragment removed.

    Raises:
        FetchError: ``bad_url``, ``not_https``, ``redirect_not_https`` or
            ``blocked_address``.
    """
    text = str(url)
    if len(text) > MAX_URL_LENGTH:
        raise _bad("URL too long")
    if isinstance(url, str) and _UNSAFE_CHARS.search(url):
        raise _bad("URL contains whitespace, control characters or backslashes")
    raw_host = url_host(text)
    meant = host_address(raw_host) if raw_host else None
    if meant is not None and not rules.permits(raw_host.lower().strip("[]") if raw_host else "", meant):
        raise FetchError(FetchErrorCode.BLOCKED_ADDRESS, "host is not a public address")
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise _bad(f"unparsable URL ({exc})") from None
    scheme = parsed.scheme
    if scheme not in ("http", "https"):
        raise _bad("only https URLs are fetched")
    if parsed.userinfo:
        raise _bad("URL carries user information")
    try:
        host = parsed.raw_host.decode("ascii").lower()
    except UnicodeDecodeError:
        raise _bad("host is not ASCII") from None
    if not host:
        raise _bad("URL has no host")
    literal = parse_ip(host)
    if literal is None:
        labels = host.split(".")
        if not all(_HOST_LABEL.match(label) for label in labels):
            raise _bad("host is not a valid DNS name")
        if _NUMERIC_LABEL.match(labels[-1]):
            raise _bad("host is a non-canonical IP address form")
    elif literal.version == 6 and literal.scope_id is not None:
        raise _bad("IPv6 zone identifiers are not accepted")
    if scheme == "http" and not (allow_http_loopback and is_loopback_host(host)):
        code = FetchErrorCode.REDIRECT_NOT_HTTPS if redirect else FetchErrorCode.NOT_HTTPS
        raise FetchError(code, "plain http is refused")
    if literal is not None and not rules.permits(host, literal):
        raise FetchError(FetchErrorCode.BLOCKED_ADDRESS, "IP literal is not public")
    return parsed.copy_with(fragment=None)
