"""What the 0.2 browser join (:mod:`frontdoor_sdk.browser_join`) and the 1.0 join callback
(:mod:`frontdoor_sdk.join_callback`) share (private): the form POST's one ``assertion``,
the join cookie's attributes and how it is read back, the scopes a page may trust.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qsl

from frontdoor_protocol.scopes import parse_scope

_FORM: Final = "application/x-www-form-urlencoded"
_MAX_BODY: Final = 16 * 1024


def check_cookie_name(name: str) -> None:
    """Raises ValueError unless ``name`` is letters, digits, ``-`` and ``_``."""
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError("cookie_name must be letters, digits, - and _")


def form_assertion(body: bytes, content_type: str | None) -> str | None:
    """The one non-empty ``assertion`` of a form POST (at most 16 KiB), else ``None``."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != _FORM or len(body) > _MAX_BODY:
        return None
    try:
        pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True, max_num_fields=20)
    except (UnicodeDecodeError, ValueError):
        return None
    values = [value for name, value in pairs if name == "assertion"]
    return values[0] if len(values) == 1 and values[0] else None


def set_cookie(name: str, value: str) -> str:
    """The join cookie's ``Set-Cookie``.

    No Max-Age or Expires: the cookie lives no longer than the browser, and its Session's
    end makes it worthless at once (every view asks Frontdoor).
    """
    return f"{name}={value}; Path=/; Secure; HttpOnly; SameSite=Lax"


def expired_cookie(name: str) -> str:
    """A ``Set-Cookie`` value that deletes the browser's cookie."""
    return f"{name}=; Path=/; Max-Age=0; Secure; HttpOnly; SameSite=Lax"


def cookie_value(cookie_header: str | None, name: str) -> str | None:
    """The first cookie called ``name`` in a ``Cookie`` header (unquoted), or ``None``."""
    for part in (cookie_header or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip().strip('"')
    return None


def granted_scopes(signed_in: bool, scope: str | None) -> frozenset[str]:
    """The scopes of a signed-in browser (none when signed out or unparseable)."""
    try:
        return frozenset(parse_scope(scope)) if signed_in and scope else frozenset()
    except ValueError:
        return frozenset()
