"""The DPoP ``htu`` comparison: the request's target URI without query and fragment.

RFC 9449 §4.3 (check 9) compares ``htu`` with the request URI "ignoring any query and
fragment parts", after the syntax- and scheme-based normalization of RFC 3986 §6.2.2 and
§6.2.3: scheme and host compared case-insensitively, the default port dropped, an empty
path is ``/``, percent-encodings compared by value (hex case, unreserved characters
decoded) and dot segments removed. Paths stay case-sensitive.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

__all__ = ["htu_normalize"]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_VISIBLE_ASCII: Final = re.compile(r"[\x21-\x7e]+")
_PERCENT: Final = re.compile(r"%(?P<hex>[0-9A-Fa-f]{2})")
_STRAY_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _percent(match: re.Match[str]) -> str:
    char = chr(int(match["hex"], 16))
    return char if char in _UNRESERVED else "%" + match["hex"].upper()


def _remove_dot_segments(path: str) -> str:
    # RFC 3986 §5.2.4, on a path that starts with "/".
    output: list[str] = []
    for segment in path.split("/")[1:]:
        if segment == "..":
            if output:
                output.pop()
        elif segment != ".":
            output.append(segment)
    if path.endswith(("/.", "/..")):
        output.append("")
    return "/" + "/".join(output)


def htu_normalize(url: str) -> str:
    """The form of an HTTP(S) URL that DPoP ``htu`` values are compared in.

    Args:
        url: An absolute ``http`` or ``https`` URL, such as a request's target URI or an
            ``htu`` claim.

    Returns:
        ``scheme://host[:port]/path``: lower-case scheme and host, no default port, no
        user information, query or fragment, normalized path.

    Raises:
        ValueError: When ``url`` is not an absolute http(s) URL of visible ASCII with a
            host, has user information, a bad port or a stray ``%``. The message never
            quotes ``url``.
    """
    # urlsplit silently drops tabs and newlines: refuse them (and any non-ASCII) first.
    if not isinstance(url, str) or _VISIBLE_ASCII.fullmatch(url) is None:
        raise ValueError("not a URL of visible ASCII characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("not a well-formed URL") from None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError("not an absolute http(s) URL")
    if "@" in parts.netloc:
        raise ValueError("user information is not allowed")
    if _STRAY_PERCENT.search(parts.path) is not None:
        raise ValueError("a percent sign must start a percent-encoding")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        netloc = f"{netloc}:{port}"
    path = _remove_dot_segments(_PERCENT.sub(_percent, parts.path or "/"))
    return f"{scheme}://{netloc}{path}"
