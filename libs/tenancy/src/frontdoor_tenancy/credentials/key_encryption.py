"""Envelope encryption of secrets at rest under the key-encryption key (KEK).

Signing keys, webhook secrets and any other secret Frontdoor must read back are stored
as blobs produced by :meth:`Kek.encrypt`: AES-256-GCM under the KEK from
``FRONTDOOR_KEK``, with a random 96-bit nonce and associated data that binds the blob
to the row it belongs to, so a blob copied into another tenant's row (or into a row of
another kind) does not decrypt.

``FRONTDOOR_KEK`` format::

    FRONTDOOR_KEK=<key>[,<key>...]

Each ``<key>`` is the unpadded base64url encoding of 32 random bytes (43 characters;
:func:`generate_kek_value` makes one). The first key encrypts; every listed key
decrypts. A key's id is derived from the key itself (see :func:`kek_id`), so nothing
but the key has to be kept: to rotate, put a new key in front (``new,old``),
re-encrypt the stored blobs (:meth:`Kek.reencrypt`; each owning library has a
``reencrypt_*`` function for its columns, run by ``frontdoor_console.cli
reencrypt-secrets``), then drop the old key from the list.

Blob format (version 1), all fields fixed length::

    0x01 | kek id (8 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext | tag (16 bytes)

The version byte and KEK id are authenticated as part of the GCM associated data,
followed by the caller's ``aad``. Random 96-bit nonces keep the collision risk
negligible below 2**32 encryptions per key (NIST SP 800-38D §8.3), far above what a
key store writes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "DecryptionError",
    "InvalidKekValue",
    "Kek",
    "Reencryption",
    "generate_kek_value",
    "kek_id",
    "row_aad",
]

_VERSION = 1
_KEY_LEN = 32
_KEK_ID_LEN = 8
_NONCE_LEN = 12
_TAG_LEN = 16
_HEADER_LEN = 1 + _KEK_ID_LEN
_MIN_BLOB_LEN = _HEADER_LEN + _NONCE_LEN + _TAG_LEN
_KEK_ID_DOMAIN = b"frontdoor/kek-id/v1\x00"
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


class InvalidKekValue(ValueError):
    """``FRONTDOOR_KEK`` is malformed. The message never contains key material."""


class DecryptionError(Exception):
    """A blob could not be decrypted.

    Attributes:
        reason: Stable code: ``malformed`` (too short or not a blob),
            ``unsupported_version``, ``unknown_kek`` (encrypted under a key that is no
            longer configured), or ``authentication_failed`` (wrong key, wrong ``aad``,
            or tampered blob).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot decrypt secret: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Reencryption:
    """What re-encrypting one KEK-encrypted column did (or, in a dry run, would do).

    Attributes:
        column: ``table.column``.
        reencrypted: Blobs moved to the current key (dry run: that would be).
        current: Blobs already under the current key (left alone).
        unreadable: Rows whose blob opens under no configured key, as ``tenant/row``
            identifiers (never the blob): restore the key that made them, or delete them.
    """

    column: str
    reencrypted: int = 0
    current: int = 0
    unreadable: tuple[str, ...] = ()


def generate_kek_value() -> str:
    """Return a fresh ``FRONTDOOR_KEK`` value holding one new random key."""
    return _b64url(os.urandom(_KEY_LEN))


def kek_id(key: bytes) -> bytes:
    """Return the 8-byte id of a KEK, written into every blob it encrypts.

    The id is a domain-separated SHA-256 of the key, truncated. It identifies the key
    without revealing anything useful about a 256-bit random secret.

    Args:
        key: The 32 raw key bytes.

    Returns:
        The id bytes (show them hex-encoded in logs and runbooks).
    """
    return hashlib.sha256(_KEK_ID_DOMAIN + key).digest()[:_KEK_ID_LEN]


def row_aad(purpose: str, *parts: str) -> bytes:
    """Build associated data binding a blob to its row.

    Each part is length-prefixed, so ``("a", "bc")`` and ``("ab", "c")`` differ.

    Args:
        purpose: What the secret is, e.g. ``"signing_key"`` or ``"webhook_secret"``;
            stops a blob of one kind being accepted in a column of another.
        *parts: The row's identity, tenant id first, e.g. ``(tenant_id, kid)``.

    Returns:
        Bytes to pass as ``aad`` to :meth:`Kek.encrypt` and :meth:`Kek.decrypt`.
    """
    out = bytearray()
    for part in (purpose, *parts):
        encoded = part.encode("utf-8")
        out += struct.pack(">I", len(encoded))
        out += encoded
    return bytes(out)


class Kek:
    """The configured key-encryption keys: one current key, any number of old ones."""

    __slots__ = ("_current", "_keys")

    def __init__(self, keys: list[bytes]) -> None:
        """Build from raw keys, the first being current.

        Args:
            keys: 32-byte keys; the first encrypts, all decrypt.

        Raises:
            InvalidKekValue: No key, a key of the wrong length, or a key listed twice.
        """
        if not keys:
            raise InvalidKekValue("FRONTDOOR_KEK holds no key")
        by_id: dict[bytes, AESGCM] = {}
        for position, key in enumerate(keys, start=1):
            if len(key) != _KEY_LEN:
                raise InvalidKekValue(f"FRONTDOOR_KEK key #{position} is {len(key)} bytes, expected {_KEY_LEN}")
            ident = kek_id(key)
            if ident in by_id:
                raise InvalidKekValue(f"FRONTDOOR_KEK key #{position} is listed twice")
            by_id[ident] = AESGCM(key)
        self._keys = by_id
        self._current = kek_id(keys[0])

    @classmethod
    def from_env_value(cls, value: str) -> Kek:
        """Parse a ``FRONTDOOR_KEK`` value (format in the module docstring).

        Args:
            value: Comma-separated unpadded base64url keys, current key first.
                Whitespace around each key is ignored.

        Returns:
            The parsed keys.

        Raises:
            InvalidKekValue: Empty, not base64url, or a key not 32 bytes long.
        """
        entries = [entry.strip() for entry in value.split(",")]
        if not value.strip() or any(not entry for entry in entries):
            raise InvalidKekValue("FRONTDOOR_KEK is empty or has an empty entry")
        keys: list[bytes] = []
        for position, entry in enumerate(entries, start=1):
            if not _B64URL.fullmatch(entry):
                raise InvalidKekValue(f"FRONTDOOR_KEK key #{position} is not unpadded base64url")
            try:
                keys.append(base64.urlsafe_b64decode(entry + "=" * (-len(entry) % 4)))
            except (binascii.Error, ValueError):
                raise InvalidKekValue(f"FRONTDOOR_KEK key #{position} is not unpadded base64url") from None
        return cls(keys)

    @property
    def current_id(self) -> str:
        """Hex id of the key that encrypts."""
        return self._current.hex()

    @property
    def ids(self) -> list[str]:
        """Hex ids of every configured key, current first."""
        return [ident.hex() for ident in self._keys]

    def encrypt(self, plaintext: bytes, *, aad: bytes) -> bytes:
        """Encrypt a secret under the current key.

        Args:
            plaintext: The secret.
            aad: Associated data naming the row (see :func:`row_aad`); the same bytes
                are needed to decrypt.

        Returns:
            A version-1 blob (format in the module docstring).
        """
        header = bytes([_VERSION]) + self._current
        nonce = os.urandom(_NONCE_LEN)
        sealed = self._keys[self._current].encrypt(nonce, plaintext, header + aad)
        return header + nonce + sealed

    def decrypt(self, blob: bytes, *, aad: bytes) -> bytes:
        """Decrypt a blob made by :meth:`encrypt` under any configured key.

        Args:
            blob: The stored blob.
            aad: The associated data it was encrypted with.

        Returns:
            The plaintext.

        Raises:
            DecryptionError: With a ``reason`` code; never the plaintext or key.
        """
        ident = self._blob_kek_id(blob)
        aead = self._keys.get(ident)
        if aead is None:
            raise DecryptionError("unknown_kek")
        header = blob[:_HEADER_LEN]
        nonce = blob[_HEADER_LEN : _HEADER_LEN + _NONCE_LEN]
        try:
            return aead.decrypt(nonce, blob[_HEADER_LEN + _NONCE_LEN :], header + aad)
        except InvalidTag:
            raise DecryptionError("authentication_failed") from None

    def reencrypt(self, blob: bytes, *, aad: bytes) -> bytes:
        """Open a blob under whichever configured key made it and seal it under the current one.

        For KEK rotation: the result has a fresh nonce and the same ``aad``. A blob already
        under the current key is returned unchanged, so re-encrypting twice is harmless.

        Args:
            blob: The stored blob.
            aad: The associated data it was encrypted with.

        Returns:
            A blob under the current key.

        Raises:
            DecryptionError: The blob does not open (see :meth:`decrypt`).
        """
        if self.is_current(blob):
            return blob
        return self.encrypt(self.decrypt(blob, aad=aad), aad=aad)

    @property
    def current_id_bytes(self) -> bytes:
        """The current key's id as written into blobs (bytes 2 to 9), for SQL filters."""
        return self._current

    def is_current(self, blob: bytes) -> bool:
        """Tell whether a blob is already encrypted under the current key.

        Args:
            blob: A stored blob.

        Returns:
            False when the blob should be re-encrypted after a KEK rotation.

        Raises:
            DecryptionError: The blob is malformed or of an unsupported version.
        """
        return self._blob_kek_id(blob) == self._current

    def __repr__(self) -> str:
        return f"Kek(current={self.current_id}, keys={len(self._keys)})"

    @staticmethod
    def _blob_kek_id(blob: bytes) -> bytes:
        if len(blob) < _MIN_BLOB_LEN:
            raise DecryptionError("malformed")
        if blob[0] != _VERSION:
            raise DecryptionError("unsupported_version")
        return bytes(blob[1:_HEADER_LEN])


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
