"""Base64url without padding, the encoding of every JOSE segment (RFC 7515 §2, §C).

Decoding is strict: only the URL-safe alphabet, no ``=`` padding, no whitespace, and only
the canonical encoding of the bytes (the unused low bits of the last character are zero),
so one byte string has exactly one accepted text. Python's decoder is lenient on all of
these, which would let a forged segment differ from the signed one and still decode.
"""

from __future__ import annotations

import base64
import re
from typing import Final

__all__ = ["b64url_decode", "b64url_encode"]

_ALPHABET: Final = re.compile(r"[A-Za-z0-9_-]*")
_SEXTET: Final = {
    char: value for value, char in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
}
# The bits of the last character that encode no data, by length mod 4 (RFC 4648 §3.5).
_UNUSED_BITS: Final = {0: 0, 2: 0x0F, 3: 0x03}


def b64url_encode(data: bytes) -> str:
    """Encode ``data`` as unpadded base64url.

    Args:
        data: Any bytes.

    Returns:
        The ASCII text, without ``=``.
    """
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode canonical unpadded base64url.

    Args:
        text: The encoded text.

    Returns:
        The decoded bytes.

    Raises:
        ValueError: When ``text`` has a character outside the alphabet, padding, an
            impossible length or non-zero unused bits. The message never quotes ``text``.
    """
    unused = _UNUSED_BITS.get(len(text) % 4)
    if unused is None or _ALPHABET.fullmatch(text) is None:
        raise ValueError("not canonical base64url")
    # Non-zero unused bits decode to the same bytes as the canonical text: refuse them.
    if unused and _SEXTET[text[-1]] & unused:
        raise ValueError("not canonical base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:  # binascii.Error
        raise ValueError("not canonical base64url") from None
