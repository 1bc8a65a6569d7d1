"""Strict JSON decoding for every document that crosses a trust boundary.

Python's ``json`` module is lenient where the protocol is not: it keeps the last of
duplicate object members, accepts ``NaN``/``Infinity``, guesses UTF-16/32 from bytes and
lets overflowing numbers become ``inf``. Here each of those is refused with a short reason
code that never repeats the input, so a caller can answer ``invalid_request`` without
echoing what it received.

Implements RFC 8259 §4 (member names SHOULD be unique; the protocol makes it a MUST:
GUIDE-json-01), §6 (no NaN or Infinity), §8.1 (UTF-8 only) and §8.2 (unpaired surrogates
are refused because they cannot be stored or re-encoded as UTF-8).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, Literal

__all__ = ["MalformedJSON", "MalformedReason", "loads", "loads_object"]

MalformedReason = Literal[
    "duplicate_member",
    "invalid_utf8",
    "syntax",
    "non_finite_number",
    "lone_surrogate",
    "too_deep",
    "not_object",
]
"""The reason codes :class:`MalformedJSON` carries; stable, safe to log and to return."""

# A ``\\u`` escape of a UTF-16 surrogate. Only when one occurs can a decoded string hold an
# unpaired surrogate, so the (rare) full walk below runs only then.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class MalformedJSON(ValueError):
    """The input is not strict JSON; ``reason`` says why without quoting the input.

    Attributes:
        reason: One of :data:`MalformedReason`.
    """

    def __init__(self, reason: MalformedReason) -> None:
        super().__init__(reason)
        self.reason: MalformedReason = reason


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Building the dict in C and comparing sizes is much faster than a Python-level loop.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise MalformedJSON("duplicate_member")
    return obj


def _refuse_constant(_name: str) -> Any:
    raise MalformedJSON("non_finite_number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # e.g. 1e400: valid grammar, but not representable (RFC 8259 §6)
        raise MalformedJSON("non_finite_number")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_members,
    parse_constant=_refuse_constant,
    parse_float=_finite_float,
    strict=True,  # control characters inside strings are refused (RFC 8259 §7)
)


def loads(data: bytes | str) -> Any:
    """Decode one strict JSON text into plain Python values.

    Args:
        data: The JSON text. ``bytes`` must be UTF-8 (RFC 8259 §8.1); a byte order mark
            is not accepted.

    Returns:
        ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``, nested.

    Raises:
        MalformedJSON: With reason ``invalid_utf8``, ``syntax``, ``duplicate_member``
            (at any depth, after escapes are decoded, so ``"a"`` and ``"\\u0061"`` collide),
            ``non_finite_number``, ``lone_surrogate`` or ``too_deep``. The exception is
            raised ``from None`` so the decoder's error, which holds the whole input, is
            not chained onto it.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedJSON("invalid_utf8") from None
    else:
        text = data
    try:
        value = _DECODER.decode(text)
    except MalformedJSON as refused:
        raise MalformedJSON(refused.reason) from None
    except RecursionError:
        raise MalformedJSON("too_deep") from None
    except ValueError:  # JSONDecodeError, and int() refusing an over-long number
        raise MalformedJSON("syntax") from None
    if _SURROGATE_ESCAPE.search(text) is not None and _has_lone_surrogate(value):
        raise MalformedJSON("lone_surrogate")
    return value


def loads_object(data: bytes | str) -> dict[str, Any]:
    """Decode strict JSON whose top level must be an object.

    Args:
        data: The JSON text, as for :func:`loads`.

    Returns:
        The decoded object.

    Raises:
        MalformedJSON: For any reason :func:`loads` gives, or ``not_object``.
    """
    value = loads(data)
    if not isinstance(value, dict):
        raise MalformedJSON("not_object")
    return value
