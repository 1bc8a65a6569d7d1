"""Keyset pagination of the management API's lists: ``limit`` and an opaque ``cursor``.

A list answers ``{"data": [...], "next_cursor": "..."}``; ``next_cursor`` is null on the
last page and otherwise goes back as ``?cursor=`` for the next one. The cursor is the
base64url of the sort key of the page's last row (never an offset, so rows added or
removed meanwhile neither repeat nor skip others). Handlers ask the repository for
``limit + 1`` rows after the cursor and hand them to `page`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from frontdoor_core.errors import Invalid
from litestar.params import Parameter

__all__ = ["CURSOR", "LIMIT", "MAX_LIMIT", "cursor_time", "decode_cursor", "encode_cursor", "page"]

T = TypeVar("T")

MAX_LIMIT = 200
LIMIT: Any = Parameter(default=50, ge=1, le=MAX_LIMIT, description="Page size, 1 to 200.")
CURSOR: Any = Parameter(default=None, max_length=600,
                        description="The next_cursor of the previous page; absent for the first page.")


def _bad() -> Invalid:
    return Invalid("invalid_cursor", "cursor is not one this API gave.", fields={"cursor": "not a cursor"})


def encode_cursor(*key: str) -> str:
    """The cursor of a row whose sort key is ``key``."""
    return base64.urlsafe_b64encode(json.dumps(list(key), separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(value: str | None, arity: int = 1) -> tuple[str, ...] | None:
    """The sort key a cursor carries (``arity`` strings), or None without a cursor.

    Raises:
        Invalid: ``invalid_cursor`` for anything `encode_cursor` did not make.
    """
    if value is None:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise _bad() from None
    if not isinstance(key, list) or len(key) != arity or not all(isinstance(k, str) and len(k) <= 300 for k in key):
        raise _bad()
    return tuple(key)


def cursor_time(text: str, *, optional: bool = False) -> datetime | None:
    """A time part of a cursor (``""`` for none, where ``optional``).

    Raises:
        Invalid: ``invalid_cursor`` when it is not an ISO 8601 time with a timezone.
    """
    if not text:
        if optional:
            return None
        raise _bad()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _bad() from None
    if moment.tzinfo is None:
        raise _bad()
    return moment


def page(rows: Sequence[T], limit: int, key: Callable[[T], tuple[str, ...]]) -> tuple[list[T], str | None]:
    """Up to ``limit`` rows of the ``limit + 1`` fetched, and the next cursor if there were more."""
    shown = list(rows[:limit])
    more = len(rows) > limit and bool(shown)
    return shown, encode_cursor(*key(shown[-1])) if more else None
