"""``WWW-Authenticate`` challenges, parsed for display (RFC 9110 §11.6.1, §11.3).

A refusal from a company's API or MCP server says why in its challenges: the scheme
(``DPoP``, ``Bearer``), ``error`` (``sign_in_required``, ``invalid_token``...),
``error_description``, ``scope``, ``resource_metadata`` (RFC 9728 §5.1). The simulator shows
them parsed; a value it cannot parse is shown as it came.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

__all__ = ["Challenge", "parse_challenges"]

_TOKEN: Final = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM: Final = re.compile(rf'({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))')
_START: Final = re.compile(rf"({_TOKEN})(?:\s+(.*))?", re.DOTALL)


class Challenge(msgspec.Struct, frozen=True, kw_only=True):
    """One challenge: its scheme and its auth-params (names lower-cased)."""

    scheme: str
    params: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def error(self) -> str | None:
        return self.params.get("error")


def _items(value: str) -> list[str] | None:
    """The comma-separated items, commas inside quoted strings kept; None on an open quote."""
    items: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for ch in value:
        if escaped:
            escaped = False
        elif quoted and ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if quoted:
        return None
    items.append("".join(current).strip())
    return [i for i in items if i]


def _param(item: str) -> tuple[str, str] | None:
    m = _PARAM.fullmatch(item)
    if m is None:
        return None
    name, quoted, bare = m.groups()
    return name.lower(), re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare


def parse_challenges(value: str) -> list[Challenge]:
    """Every challenge of a ``WWW-Authenticate`` value; ``[]`` when it does not parse."""
    items = _items(value)
    if items is None:
        return []
    out: list[tuple[str, dict[str, str]]] = []
    for item in items:
        param = _param(item)
        if param is not None and out:
            out[-1][1][param[0]] = param[1]  # another auth-param of the current challenge
            continue
        m = _START.fullmatch(item)
        if m is None:
            return []
        params: dict[str, str] = {}
        rest = (m.group(2) or "").strip()
        if rest:
            first = _param(rest)
            if first is not None:
                params[first[0]] = first[1]
            # else a token68 (RFC 9110 §11.4): not shown
        out.append((m.group(1), params))
    return [Challenge(scheme=scheme, params=params) for scheme, params in out]
