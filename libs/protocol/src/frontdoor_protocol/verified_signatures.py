"""Issuer-signed tokens whose signature already verified, remembered per key set.

A Session Token is presented on every request of its Session, and its ES256 signature is
the same each time: re-verifying it costs as much as the request's DPoP proof, which is new
on every request and must be verified every time. `VerifiedSignatures` remembers, for a
bounded number of tokens, that *these exact bytes* verified against *this* key set object,
so the next presentation skips the parse and the signature check of those bytes (their
header was checked with them and cannot differ). The claims are checked again on every
request (``iss``, ``aud``, ``exp``/``iat`` against the time now, the binding), and so is the
proof.

Only a token whose signature verified is ever stored, so a caller cannot fill it with
forgeries. A hit needs the very same `KeySet` object the signature was checked with: the
holder of the keys (the sdk's JWKS cache) hands out a new object when it refetches them,
and a key retired from the JWKS then fails as it would without the cache. Tokens are kept
by their SHA-256 digest, not their text (bounded memory, and the table holds no bearer
credential).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Final

from joserfc.jwk import KeySet

from frontdoor_protocol.compact_jws import CompactJWS

__all__ = ["DEFAULT_MAX_TOKENS", "VerifiedSignatures"]

DEFAULT_MAX_TOKENS: Final = 10_000


class VerifiedSignatures:
    """A bounded LRU of (token digest → the key set it verified with, the parsed JWS).

    Args:
        max_tokens: The most tokens remembered; the least recently used goes first.
    """

    def __init__(self, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self._max = max_tokens
        self._entries: OrderedDict[bytes, tuple[KeySet, CompactJWS]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _digest(token: str) -> bytes:
        return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()

    def get(self, token: str, keys: KeySet) -> CompactJWS | None:
        """The JWS of ``token`` if its signature verified against this very ``keys`` object."""
        digest = self._digest(token)
        hit = self._entries.get(digest)
        if hit is None or hit[0] is not keys:
            return None
        self._entries.move_to_end(digest)
        return hit[1]

    def put(self, token: str, keys: KeySet, jws: CompactJWS) -> None:
        """Remember that ``token``'s signature verified against ``keys`` (call only after it did)."""
        digest = self._digest(token)
        self._entries[digest] = (keys, jws)
        self._entries.move_to_end(digest)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
