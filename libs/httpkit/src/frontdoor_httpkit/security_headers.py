"""Security headers on every response (pages and APIs alike), and the page policy they hold.

The Content-Security-Policy allows a form to post only to the page's own origin
(``form-action 'self'``). Browsers apply ``form-action`` to the redirects that follow a
form's POST too (CSP Level 3, §6.4.1 "form-action"; Chromium enforces it), so a page whose form is
answered by a redirect to another origin (the issuer's device page to the company's
login page, a Direct Sign-In's consent page to the agent's ``redirect_uri``) must name
that one origin in its own policy: `content_security_policy` with sources made by
`origin_source`, never a wildcard.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SecurityHeadersMiddleware", "content_security_policy", "origin_source"]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
# CSP Level 3 host-source, without wildcards: labels of letters, digits and hyphens.
_HOST: Final = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*")
_SOURCE: Final = re.compile(rf"https?://{_HOST.pattern}(?::[0-9]{{1,5}})?")


def origin_source(url: str) -> str | None:
    """The CSP source expression that matches exactly the origin of ``url``.

    ``scheme://host[:port]``, lower case, the port only when it is not the scheme's
    default one (``HTTPS://Shop.Example:443/login`` gives ``https://shop.example``). A
    source without a path matches any path, and after a redirect a path would be ignored
    anyway (CSP Level 3, "Does url match expression in origin with redirect count?").

    Returns:
        The source, or None when ``url`` is not an absolute ``http(s)`` URL whose host a
        CSP source can name (an IPv6 literal, characters outside the host grammar): the
        caller then allows nothing more, and the browser refuses the redirect.
    """
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    if not _HOST.fullmatch(host):
        return None
    suffix = f":{port}" if port is not None and port != _DEFAULT_PORTS[scheme] else ""
    return f"{scheme}://{host}{suffix}"


def content_security_policy(*, form_action: Iterable[str] = ()) -> str:
    """The policy of Frontdoor's pages; ``form_action`` adds origins a form may end at.

    Args:
        form_action: Sources made by `origin_source`, each allowed after ``'self'``.

    Raises:
        ValueError: If a source is not one `origin_source` makes (it would widen or
            break the policy).
    """
    extra: list[str] = []
    for source in form_action:
        if not _SOURCE.fullmatch(source):
            raise ValueError("form_action takes origin sources such as https://shop.example")
        if source not in extra:
            extra.append(source)
    form = " ".join(["'self'", *extra])
    return ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src 'self'; form-action {form}; base-uri 'none'; frame-ancestors 'none'")


_DEFAULTS: list[tuple[bytes, bytes]] = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", content_security_policy().encode()),
]


class SecurityHeadersMiddleware:
    """Adds the defaults unless the handler set the header itself."""

    def __init__(self, app: ASGIApp, *, hsts: bool = False) -> None:
        self.app = app
        self.extra = [(b"strict-transport-security", b"max-age=31536000; includeSubDomains")] if hsts else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers.extend((k, v) for k, v in [*_DEFAULTS, *self.extra] if k not in present)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, wrapped)
