"""Prefixed, sortable identifiers (``ten_01JD...``).

48 bits of millisecond time then 80 random bits, Crockford base32 (like ULID): IDs sort
by creation time and are safe to show. They are not secrets; bearer values use
`secrets` with at least 128 random bits instead.
"""

from __future__ import annotations

import os
import re
import threading
import time

__all__ = ["PREFIXES", "is_id", "new_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
PREFIXES = frozenset({"ten", "adm", "key", "dom", "aud", "sgk", "req", "evt", "ses", "asn", "op", "msg", "att", "whe", "whs", "whr", "inv", "cnv", "sst", "sim"})
_SHAPE = re.compile(r"^([a-z]{2,5})_([0-9A-HJKMNP-TV-Z]{26})$")
_RANDOM_BITS = 80
_lock = threading.Lock()
_last = [0, 0]  # (ms, random part) of the previous ID of this process


def new_id(prefix: str, *, now_ms: int | None = None) -> str:
    """A new ID with ``prefix`` (one of `PREFIXES`)."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = int.from_bytes(os.urandom(10), "big")
    if now_ms is not None:
        return _encode(prefix, (ms << _RANDOM_BITS) | rand)
    with _lock:
        # Monotonic within a process: IDs made in the same millisecond still sort in order.
        if ms <= _last[0]:
            ms, rand = _last[0], (_last[1] + 1) % (1 << _RANDOM_BITS)
        _last[0], _last[1] = ms, rand
    return _encode(prefix, (ms << _RANDOM_BITS) | rand)


def _encode(prefix: str, value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return f"{prefix}_{''.join(reversed(chars))}"


def is_id(text: str, prefix: str) -> bool:
    """True when ``text`` is syntactically an ID with ``prefix``."""
    m = _SHAPE.fullmatch(text)
    return m is not None and m.group(1) == prefix
