"""Extension names (PAP §3.3).

Extensions published with the protocol have plain names (``operations``). Anyone else
starts the name with a domain they control, ``example.com/gift-wrap`` (PAP-3.3-01). A
name that is neither is ignored by agents, like any extension they do not support
(PAP-3.3-02).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Final

from frontdoor_protocol.domain_name import is_domain_name

__all__ = ["OPERATIONS_EXTENSION", "ExtensionNameKind", "extension_name_kind"]

OPERATIONS_EXTENSION: Final = "operations"
"""The Operations extension's name; Frontdoor implements its version ``1``."""

_PLAIN: Final = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_LOCAL_PART: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")


class ExtensionNameKind(StrEnum):
    """What kind of name an extension has."""

    PLAIN = "plain"
    """Defined with the protocol."""
    THIRD_PARTY = "third_party"
    """Defined by the owner of the domain it starts with."""
    INVALID = "invalid"
    """Neither; ignored."""


def extension_name_kind(name: str) -> ExtensionNameKind:
    """Classify an extension name (PAP-3.3-01).

    Args:
        name: A member name of an ``extensions`` object.

    Returns:
        ``PLAIN`` for ``operations``, ``THIRD_PARTY`` for ``example.com/gift-wrap`` (the
        domain must be a fully qualified name, so ``localhost/x`` is not), else ``INVALID``.
    """
    if _PLAIN.fullmatch(name):
        return ExtensionNameKind.PLAIN
    domain, slash, local = name.partition("/")
    if slash and is_domain_name(domain) and _LOCAL_PART.fullmatch(local):
        return ExtensionNameKind.THIRD_PARTY
    return ExtensionNameKind.INVALID
