"""Standard Webhooks signatures: the one implementation Frontdoor signs with and companies verify with.

Per the Standard Webhooks specification (https://www.standardwebhooks.com, "Signature
scheme"), the signed content is ``{webhook-id}.{webhook-timestamp}.{body}`` (the exact body
bytes) and ``webhook-signature`` holds space-separated ``<version>,<base64>`` entries, one
per valid secret or key, so a receiver holding either side of a rotation verifies:

- ``v1``: HMAC-SHA256 keyed with the base64-decoded part of a ``whsec_`` secret;
- ``v1a``: an Ed25519 signature by a ``whsk_`` private key (base64 of the 32-byte seed, kept
  by Frontdoor), verified with its ``whpk_`` public key (base64 of the raw 32-byte key, not
  secret).

Secrets and keys are parsed by one strict parser each (exact base64, fixed sizes), whose
errors never contain the value. Verification checks the timestamp against a tolerance
either way, compares every ``v1`` MAC in constant time without an early exit, and names
the reason of a refusal. Pure: no I/O, time passed in; generating secrets is the
dispatcher's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from frontdoor_protocol.resource_request import RequestHeaders, header_values

__all__ = [
    "DEFAULT_WEBHOOK_TOLERANCE",
    "PUBLIC_KEY_PREFIX",
    "SECRET_PREFIX",
    "SIGNING_KEY_PREFIX",
    "WEBHOOK_ID_HEADER",
    "WEBHOOK_SIGNATURE_HEADER",
    "WEBHOOK_TIMESTAMP_HEADER",
    "WebhookKeys",
    "WebhookRefusal",
    "WebhookSignatureError",
    "format_public_key",
    "format_secret",
    "format_signing_key",
    "parse_public_key",
    "parse_secret",
    "parse_signature_header",
    "parse_signing_key",
    "sign_v1",
    "sign_v1a",
    "signature_header",
    "signed_content",
    "verify_webhook_signature",
]

SECRET_PREFIX: Final = "whsec_"
SIGNING_KEY_PREFIX: Final = "whsk_"
PUBLIC_KEY_PREFIX: Final = "whpk_"
WEBHOOK_ID_HEADER: Final = "webhook-id"
WEBHOOK_TIMESTAMP_HEADER: Final = "webhook-timestamp"
WEBHOOK_SIGNATURE_HEADER: Final = "webhook-signature"
DEFAULT_WEBHOOK_TOLERANCE: Final = 300
"""Seconds a ``webhook-timestamp`` may be away from the receiver's clock, either way (the specification's 5 minutes)."""

_MIN_SECRET_BYTES: Final = 24  # the specification: a key of 24 to 64 bytes
_MAX_SECRET_BYTES: Final = 64
_ED25519_KEY_BYTES: Final = 32
_ED25519_SIGNATURE_BYTES: Final = 64
_MAX_ID_LENGTH: Final = 255
_MAX_SIGNATURE_HEADER_LENGTH: Final = 8192
_MAX_TIMESTAMP_DIGITS: Final = 12

WebhookRefusal = Literal["missing_header", "bad_timestamp", "too_old", "too_new", "bad_signature"]


class WebhookSignatureError(Exception):
    """A delivery's headers, timestamp or signature did not verify. The message holds no secret.

    Attributes:
        reason: Why: a header is missing, repeated or too long (``missing_header``), the
            timestamp is not integer seconds (``bad_timestamp``), out of tolerance
            (``too_old``, ``too_new``), or no signature verifies (``bad_signature``).
    """

    def __init__(self, reason: WebhookRefusal, message: str) -> None:
        super().__init__(message)
        self.reason: WebhookRefusal = reason


def _decode(encoded: str, prefix: str, what: str) -> bytes:
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError:  # binascii.Error is a ValueError
        raise ValueError(f"a webhook {what} is {prefix} followed by base64") from None  # never echo it


def parse_secret(value: str) -> bytes:
    """The HMAC key of a ``whsec_`` secret.

    The prefix may be left out, as the Standard Webhooks reference libraries allow; a
    ``whpk_`` or ``whsk_`` key is refused rather than mistaken for a secret.

    Args:
        value: ``whsec_`` followed by the base64 of 24 to 64 bytes.

    Returns:
        The decoded key.

    Raises:
        ValueError: The value is malformed (the message never contains it).
    """
    if not isinstance(value, str) or not value:
        raise ValueError("a webhook secret is a non-empty whsec_... string")
    if value.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError("a whpk_ public key is not a webhook secret")
    if value.startswith(SIGNING_KEY_PREFIX):
        raise ValueError("a whsk_ signing key is not a webhook secret")
    key = _decode(value.removeprefix(SECRET_PREFIX), SECRET_PREFIX, "secret")
    if not _MIN_SECRET_BYTES <= len(key) <= _MAX_SECRET_BYTES:
        raise ValueError(f"a webhook secret holds {_MIN_SECRET_BYTES} to {_MAX_SECRET_BYTES} bytes")
    return key


def _ed25519_raw(value: str, prefix: str, what: str) -> bytes:
    if not isinstance(value, str) or not value.startswith(prefix):
        raise ValueError(f"a webhook {what} is a {prefix}... string")
    raw = _decode(value[len(prefix):], prefix, what)
    if len(raw) != _ED25519_KEY_BYTES:
        raise ValueError(f"a webhook {what} is {prefix} and the base64 of {_ED25519_KEY_BYTES} bytes (Ed25519)")
    return raw


def parse_signing_key(value: str) -> Ed25519PrivateKey:
    """The Ed25519 private key of a ``whsk_`` signing key (base64 of the 32-byte seed).

    Raises:
        ValueError: The value is malformed (the message never contains it).
    """
    return Ed25519PrivateKey.from_private_bytes(_ed25519_raw(value, SIGNING_KEY_PREFIX, "signing key"))


def parse_public_key(value: str) -> Ed25519PublicKey:
    """The Ed25519 public key of a ``whpk_`` key (base64 of the raw 32-byte key).

    Raises:
        ValueError: The value is malformed (the message never contains it).
    """
    return Ed25519PublicKey.from_public_bytes(_ed25519_raw(value, PUBLIC_KEY_PREFIX, "public key"))


def format_secret(key: bytes) -> str:
    """The ``whsec_`` text of an HMAC key of 24 to 64 bytes.

    Raises:
        ValueError: The key has another size.
    """
    if not _MIN_SECRET_BYTES <= len(key) <= _MAX_SECRET_BYTES:
        raise ValueError(f"a webhook secret holds {_MIN_SECRET_BYTES} to {_MAX_SECRET_BYTES} bytes")
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def format_signing_key(key: Ed25519PrivateKey) -> str:
    """The ``whsk_`` text of an Ed25519 private key (its 32-byte seed)."""
    seed = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return SIGNING_KEY_PREFIX + base64.b64encode(seed).decode("ascii")


def format_public_key(key: Ed25519PublicKey) -> str:
    """The ``whpk_`` text of an Ed25519 public key (its raw 32 bytes)."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    """What every scheme signs: ``{msg_id}.{timestamp}.{body}``, the body's exact bytes."""
    return f"{msg_id}.{timestamp}.".encode() + body


def _mac(key: bytes, content: bytes) -> bytes:
    return hmac.new(key, content, hashlib.sha256).digest()


def sign_v1(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Sign one delivery with HMAC-SHA256.

    Args:
        secret: A ``whsec_`` secret.
        msg_id: The ``webhook-id``.
        timestamp: The ``webhook-timestamp``, Unix seconds.
        body: The exact body bytes sent.

    Returns:
        ``v1,<base64 HMAC-SHA256>``.

    Raises:
        ValueError: The secret is malformed (the message never contains it).
    """
    mac = _mac(parse_secret(secret), signed_content(msg_id, timestamp, body))
    return "v1," + base64.b64encode(mac).decode("ascii")


def sign_v1a(signing_key: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Sign one delivery with Ed25519 (the asymmetric scheme).

    Returns:
        ``v1a,<base64 signature>``.

    Raises:
        ValueError: The key is not a well-formed ``whsk_`` key (the message never contains it).
    """
    signature = parse_signing_key(signing_key).sign(signed_content(msg_id, timestamp, body))
    return "v1a," + base64.b64encode(signature).decode("ascii")


def signature_header(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one entry per secret or key, space-separated, in order.

    A ``whsk_`` key gives a ``v1a`` (Ed25519) entry, a ``whsec_`` secret a ``v1`` (HMAC) one.

    Raises:
        ValueError: No secret, or a malformed one.
    """
    if not secrets:
        raise ValueError("at least one secret is needed to sign")
    return " ".join(
        sign_v1a(secret, msg_id, timestamp, body) if secret.startswith(SIGNING_KEY_PREFIX)
        else sign_v1(secret, msg_id, timestamp, body)
        for secret in secrets
    )


def parse_signature_header(value: str) -> list[tuple[str, bytes]]:
    """The ``(version, signature)`` entries of a ``webhook-signature`` value.

    Entries are separated by spaces. An empty entry, one without a version or a comma, or
    one whose signature is not strict base64 cannot verify and is left out; entries of
    any version are kept, in order.
    """
    entries: list[tuple[str, bytes]] = []
    for entry in value.split(" "):
        version, comma, encoded = entry.partition(",")
        if not version or not comma or not encoded:
            continue
        try:
            entries.append((version, base64.b64decode(encoded, validate=True)))
        except ValueError:  # binascii.Error is a ValueError
            continue
    return entries


@dataclass(frozen=True, repr=False)
class WebhookKeys:
    """What a receiver verifies with: HMAC keys for ``v1`` entries, public keys for ``v1a``.

    Attributes:
        secrets: Decoded ``whsec_`` keys (several while a secret rotates).
        public_keys: Ed25519 public keys (several while a signing key rotates).
    """

    secrets: tuple[bytes, ...] = ()
    public_keys: tuple[Ed25519PublicKey, ...] = ()

    @classmethod
    def parse(cls, secrets: Sequence[str] = (), public_keys: Sequence[str] = ()) -> WebhookKeys:
        """Parse ``whsec_`` secrets and ``whpk_`` public keys.

        Raises:
            ValueError: One is malformed (the message never contains it).
        """
        return cls(tuple(parse_secret(s) for s in secrets), tuple(parse_public_key(k) for k in public_keys))

    def __repr__(self) -> str:
        return f"WebhookKeys({len(self.secrets)} secret(s), {len(self.public_keys)} public key(s))"  # never a key


def _one(headers: RequestHeaders, name: str) -> str:
    values = header_values(headers, name)
    if len(values) != 1 or not isinstance(values[0], str) or not values[0].strip():
        raise WebhookSignatureError("missing_header", f"missing or repeated {name} header: exactly one is required")
    return values[0].strip()


def _ed25519_verifies(key: Ed25519PublicKey, signature: bytes, content: bytes) -> bool:
    try:
        key.verify(signature, content)
    except InvalidSignature:
        return False
    return True


def verify_webhook_signature(
    keys: WebhookKeys,
    headers: RequestHeaders,
    body: bytes,
    *,
    now: float,
    tolerance: float = DEFAULT_WEBHOOK_TOLERANCE,
) -> tuple[str, int]:
    """Check a delivery's headers, timestamp and signature, as a receiver does.

    Accepted when any ``v1`` entry matches any secret or any ``v1a`` entry verifies with
    any public key; entries of other versions are ignored.

    Args:
        keys: The receiver's secrets and public keys.
        headers: The request headers (a mapping with names in any case, a multi-map, or pairs).
        body: The exact body bytes received.
        now: The receiver's clock, Unix seconds.
        tolerance: Seconds ``webhook-timestamp`` may be from ``now``, either way.

    Returns:
        The ``webhook-id`` and the signed ``webhook-timestamp``.

    Raises:
        WebhookSignatureError: A header is missing, repeated or too long, the timestamp is
            malformed or out of tolerance, or no signature verifies.
    """
    msg_id = _one(headers, WEBHOOK_ID_HEADER)
    raw_timestamp = _one(headers, WEBHOOK_TIMESTAMP_HEADER)
    signatures = _one(headers, WEBHOOK_SIGNATURE_HEADER)
    if len(msg_id) > _MAX_ID_LENGTH or len(signatures) > _MAX_SIGNATURE_HEADER_LENGTH:
        raise WebhookSignatureError("missing_header", "a webhook header is too long")
    # isdigit alone takes "²" and other non-ASCII digits int() refuses or reads differently.
    if not (raw_timestamp.isascii() and raw_timestamp.isdigit()) or len(raw_timestamp) > _MAX_TIMESTAMP_DIGITS:
        raise WebhookSignatureError("bad_timestamp", "webhook-timestamp must be integer seconds")
    timestamp = int(raw_timestamp)
    if timestamp < now - tolerance:
        raise WebhookSignatureError("too_old", "webhook-timestamp out of tolerance: too old")
    if timestamp > now + tolerance:
        raise WebhookSignatureError("too_new", "webhook-timestamp out of tolerance: in the future")
    content = signed_content(msg_id, timestamp, body)
    expected = [_mac(key, content) for key in keys.secrets]
    matched = False
    for version, signature in parse_signature_header(signatures):
        if version == "v1":
            for mac in expected:
                # Compare every pair: no early exit that would time which secret matched.
                matched |= hmac.compare_digest(signature, mac)
        elif version == "v1a" and len(signature) == _ED25519_SIGNATURE_BYTES:
            matched |= any(_ed25519_verifies(key, signature, content) for key in keys.public_keys)
    if not matched:
        raise WebhookSignatureError("bad_signature", "no matching webhook signature")
    return msg_id, timestamp
