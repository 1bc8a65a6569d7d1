r"""Management API keys: issuing, parsing and hashing.

Format (62 characters, base62 alphabet ``0-9A-Za-z`` after the fixed parts)::

    fdk_<prefix: 8>_<secret: 43><checksum: 6>
    e.g. fdk_7Hq2ZcL0_4Xb...(43)...kQ91cZ

* ``fdk_`` marks a Frontdoor key, so secret scanners can match
  ``\bfdk_[0-9A-Za-z]{8}_[0-9A-Za-z]{49}\b`` with few false positives.
* ``prefix`` is a random public id (about 47 bits) stored in clear, so a key can be
  listed and named ("fdk_7Hq2ZcL0_...") without storing anything that grants access.
* ``secret`` is 43 random base62 characters, about 256 bits.
* ``checksum`` is the CRC-32 of everything before it, in 6 base62 characters. It lets
  :func:`parse_api_key` (and a secret scanner, offline) reject typos and look-alikes
  before any database lookup. It reveals at most 32 bits of the secret, leaving over
  220.

Only the prefix and the SHA-256 of the whole key are stored. A fast hash is right here
where it would be wrong for passwords: a password is guessable, so its hash must make
each guess expensive; a 256-bit random secret cannot be guessed at any speed, so a
slow hash would add no protection and only cost CPU on every API request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import zlib
from dataclasses import dataclass, field

__all__ = [
    "API_KEY_PATTERN",
    "IssuedApiKey",
    "ParsedApiKey",
    "api_key_hashes_equal",
    "hash_api_key",
    "new_api_key",
    "parse_api_key",
    "verify_api_key",
]

_ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
_TAG = "fdk_"
_PREFIX_LEN = 8
_SECRET_LEN = 43
_CHECKSUM_LEN = 6

API_KEY_PATTERN = re.compile(
    rf"{_TAG}(?P<prefix>[0-9A-Za-z]{{{_PREFIX_LEN}}})_"
    rf"(?P<secret>[0-9A-Za-z]{{{_SECRET_LEN}}})(?P<checksum>[0-9A-Za-z]{{{_CHECKSUM_LEN}}})"
)
"""The exact shape of a key (use ``fullmatch``; wrap in ``\\b`` for scanning text)."""


@dataclass(frozen=True, slots=True)
class IssuedApiKey:
    """A new key: show ``plaintext`` once, store ``prefix`` and ``hash``.

    Attributes:
        plaintext: The full key; hidden from ``repr``, never stored or logged.
        prefix: The 8-character public id.
        hash: SHA-256 of the full key.
    """

    plaintext: str = field(repr=False)
    prefix: str
    hash: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ParsedApiKey:
    """A well-formed presented key, ready for lookup.

    Attributes:
        prefix: The 8-character public id.
        hash: SHA-256 of the full key, to compare with the stored one.
    """

    prefix: str
    hash: bytes = field(repr=False)


def new_api_key() -> IssuedApiKey:
    """Issue a new random API key.

    Returns:
        The key, its prefix and its hash.
    """
    prefix = _random(_PREFIX_LEN)
    body = f"{_TAG}{prefix}_{_random(_SECRET_LEN)}"
    plaintext = body + _checksum(body)
    return IssuedApiKey(plaintext=plaintext, prefix=prefix, hash=hash_api_key(plaintext))


def parse_api_key(text: str) -> ParsedApiKey | None:
    """Recognise a presented API key.

    Args:
        text: The bearer credential as received (no surrounding whitespace).

    Returns:
        The prefix and hash, or None when the text is not exactly a key of this
        format with a valid checksum.
    """
    match = API_KEY_PATTERN.fullmatch(text)
    if match is None:
        return None
    body = text[:-_CHECKSUM_LEN]
    if not hmac.compare_digest(match["checksum"], _checksum(body)):
        return None
    return ParsedApiKey(prefix=match["prefix"], hash=hash_api_key(text))


def hash_api_key(text: str) -> bytes:
    """Return the SHA-256 of a key, as stored.

    Args:
        text: The full key.

    Returns:
        32 bytes.
    """
    return hashlib.sha256(text.encode("utf-8")).digest()


def api_key_hashes_equal(stored: bytes, presented: bytes) -> bool:
    """Compare two key hashes in constant time.

    Args:
        stored: The hash from the database row.
        presented: The hash of the presented key.

    Returns:
        True when they are equal.
    """
    return hmac.compare_digest(stored, presented)


def verify_api_key(text: str, stored_hash: bytes) -> bool:
    """Check a presented key against a stored hash (parse, hash, compare).

    Args:
        text: The presented key.
        stored_hash: The hash stored for the key's prefix.

    Returns:
        True only for a well-formed key whose hash equals ``stored_hash``.
    """
    parsed = parse_api_key(text)
    return parsed is not None and api_key_hashes_equal(stored_hash, parsed.hash)


def _random(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def _checksum(body: str) -> str:
    value = zlib.crc32(body.encode("ascii"))
    digits: list[str] = []
    for _ in range(_CHECKSUM_LEN):
        value, digit = divmod(value, len(_ALPHABET))
        digits.append(_ALPHABET[digit])
    return "".join(reversed(digits))
