"""RFC 8252 loopback redirect URIs for PAP 1.0 Direct Sign-In ([S §3], RFC 8252 §7.3, §8.3).

A native agent receives the authorization response on a loopback IP literal,
``http://127.0.0.1:{port}/…`` or ``http://[::1]:{port}/…`` (never ``localhost``, RFC 8252
§8.3), on a port the operating system picks at the time of the request. Its Client ID
Metadata Document registers such a URI with any port (or none); a request then matches it
when everything but the port is equal, character for character (RFC 8252 §7.3).

0.2 keeps its exact match against the HTTPS ``redirect_uris`` only (PAP-4.5-01): the
loopback registrations are kept apart (`ClientMetadata.loopback_redirect_uris`) and only
the 1.0 sign-in consults them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["is_loopback_redirect", "loopback_redirect_matches"]

# scheme, loopback literal, optional port, then a path (no fragment, RFC 6749 §3.1.2).
_LOOPBACK = re.compile(r"^http://(127\.0\.0\.1|\[::1\])(?::([0-9]{1,5}))?(/[^#\s]*)?$")


def _parts(uri: str) -> tuple[str, int | None, str] | None:
    m = _LOOPBACK.fullmatch(uri)
    if m is None:
        return None
    port = int(m.group(2)) if m.group(2) is not None else None
    if port is not None and not 0 < port <= 65535:
        return None
    return m.group(1), port, m.group(3) or "/"


def is_loopback_redirect(uri: object) -> bool:
    """Whether ``uri`` is an RFC 8252 §7.3 loopback IP literal redirect URI."""
    return isinstance(uri, str) and _parts(uri) is not None


def loopback_redirect_matches(requested: str, registered: Iterable[str]) -> bool:
    """Whether ``requested`` matches a registered loopback redirect URI, any port (RFC 8252 §7.3).

    The literal (``127.0.0.1`` or ``[::1]``), the path and the query must be equal,
    character for character; only the port may differ.
    """
    asked = _parts(requested)
    if asked is None:
        return False
    for uri in registered:
        known = _parts(uri)
        if known is not None and known[0] == asked[0] and known[2] == asked[2]:
            return True
    return False
