"""Scopes: the two the protocol defines and the syntax every custom scope follows.

``scope`` values are space-separated lists of scope-tokens (RFC 6749 §3.3, PAP-4.4-03).
A company may define its own scopes with a description (``auth.custom_scopes``); Frontdoor
keeps the ``poppy:`` prefix for the protocol's own, so a tenant cannot shadow them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

__all__ = [
    "BUILT_IN_SCOPES",
    "POPPY_READ",
    "POPPY_WRITE",
    "RESERVED_SCOPE_PREFIX",
    "custom_scope_problem",
    "format_scope",
    "is_scope_token",
    "parse_scope",
]

POPPY_READ: Final = "poppy:read"
"""Read the signed-in user's account data that the company offers to agents."""
POPPY_WRITE: Final = "poppy:write"
"""Make changes in the signed-in user's account, such as proposing operations."""

BUILT_IN_SCOPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        POPPY_READ: "See your account with this company, such as orders and saved details.",
        POPPY_WRITE: "Make changes in your account with this company on your behalf.",
    }
)
"""The protocol's scopes with the description Frontdoor shows on consent pages."""

RESERVED_SCOPE_PREFIX: Final = "poppy:"
"""Custom scopes may not start with this: the namespace belongs to the protocol."""

_MAX_SCOPE_LENGTH: Final = 128
# scope-token = 1*( %x21 / %x23-5B / %x5D-7E ): visible ASCII except '"' and '\'.
_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def is_scope_token(value: object) -> bool:
    """Whether ``value`` is one scope-token (RFC 6749 §3.3).

    Args:
        value: Anything, typically one element of a ``scopes`` array.

    Returns:
        ``True`` for a non-empty string of visible ASCII without ``"`` or ``\\``.
    """
    return isinstance(value, str) and _SCOPE_TOKEN.fullmatch(value) is not None


def parse_scope(value: str) -> tuple[str, ...]:
    """Split a ``scope`` parameter into its tokens, in order, without repeats.

    Args:
        value: The space-delimited parameter (RFC 6749 §3.3, PAP-4.4-03).

    Returns:
        The distinct scope-tokens, first occurrence first.

    Raises:
        ValueError: If the value is empty, has leading, trailing or doubled spaces, or
            holds a character a scope-token cannot.
    """
    tokens = value.split(" ")
    if not value or not all(is_scope_token(token) for token in tokens):
        raise ValueError("scope is not a space-delimited list of scope-tokens")
    return tuple(dict.fromkeys(tokens))


def format_scope(scopes: Iterable[str]) -> str:
    """Join scope-tokens into a ``scope`` parameter, dropping repeats.

    Args:
        scopes: Scope-tokens in the order to send them.

    Returns:
        The space-delimited value.

    Raises:
        ValueError: If an element is not a scope-token.
    """
    tokens = tuple(dict.fromkeys(scopes))
    if not all(is_scope_token(token) for token in tokens):
        raise ValueError("every scope must be a scope-token")
    return " ".join(tokens)


def custom_scope_problem(name: str, description: str) -> str | None:
    """Why a company's own scope cannot be offered, or ``None`` when it can.

    Args:
        name: The scope a tenant wants to define.
        description: What a user is told it allows (shown in ``auth.custom_scopes``).

    Returns:
        ``None``, or one of ``syntax`` (not a scope-token, RFC 6749 §3.3), ``too_long``,
        ``reserved`` (in the ``poppy:`` namespace) or ``no_description``.
    """
    if not is_scope_token(name):
        return "syntax"
    if len(name) > _MAX_SCOPE_LENGTH:
        return "too_long"
    if name.startswith(RESERVED_SCOPE_PREFIX):
        return "reserved"
    if not description.strip():
        return "no_description"
    return None
