"""Standard Webhooks signatures: secrets, the signed headers, and verification.

Per the Standard Webhooks specification (v1, "Signature scheme"): the signed content is
``{webhook-id}.{webhook-timestamp}.{body}``, signed with HMAC-SHA256 under the
base64-decoded part of a ``whsec_`` secret; ``webhook-signature`` carries
``v1,<base64 MAC>`` entries separated by spaces, one per valid secret, so a receiver
holding either secret of a rotation verifies. Pure: no I/O, time passed in.

The asymmetric scheme ("v1a"): an Ed25519 signature over the same content, sent as
``v1a,<base64 signature>`` beside the ``v1`` entries. Its private key is a ``whsk_``
secret (base64 of the 32-byte seed, Frontdoor keeps it); receivers verify with the
public key, ``whpk_`` and the base64 of the raw 32-byte key, which is not secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "PUBLIC_KEY_PREFIX",
    "SECRET_PREFIX",
    "SIGNING_KEY_PREFIX",
    "SIGNATURE_HEADER",
    "WebhookVerificationError",
    "new_secret",
    "new_signing_key",
    "public_key_of",
    "sign",
    "sign_v1a",
    "signature_header",
    "verify",
    "verify_v1a",
    "webhook_headers",
]

SECRET_PREFIX = "whsec_"
SIGNING_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"
_ED25519_BYTES = 32
SIGNATURE_HEADER = "webhook-signature"
_SECRET_BYTES = 32
_MIN_KEY_BYTES = 24
_MAX_KEY_BYTES = 64
_DEFAULT_TOLERANCE_S = 300


class WebhookVerificationError(Exception):
    """A delivery's signature or timestamp did not verify. The message holds no secret."""


def new_secret() -> str:
    """Return a fresh endpoint secret: ``whsec_`` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(os.urandom(_SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret is whsec_ and base64") from None
    if not _MIN_KEY_BYTES <= len(key) <= _MAX_KEY_BYTES:
        raise ValueError(f"a webhook secret holds {_MIN_KEY_BYTES} to {_MAX_KEY_BYTES} bytes")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Sign one delivery.

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
    content = f"{msg_id}.{timestamp}.".encode() + body
    mac = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode("ascii")


def signature_header(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one signature per secret, space-separated.

    A ``whsec_`` secret gives a ``v1`` (HMAC) entry, a ``whsk_`` key a ``v1a`` (Ed25519) one.

    Raises:
        ValueError: No secret, or a malformed one.
    """
    if not secrets:
        raise ValueError("at least one secret is needed to sign")
    return " ".join(sign_v1a(secret, msg_id, timestamp, body) if secret.startswith(SIGNING_KEY_PREFIX)
                    else sign(secret, msg_id, timestamp, body) for secret in secrets)


def webhook_headers(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header that makes a request a Standard Webhooks delivery.

    Args:
        secrets: The endpoint's valid secrets (``whsec_`` and ``whsk_``), newest first.
        msg_id: The message ID (the same on every attempt, for receivers' idempotency).
        timestamp: Unix seconds of this attempt (fresh on every attempt).
        body: The exact body bytes.

    Returns:
        ``webhook-id``, ``webhook-timestamp``, ``webhook-signature`` and ``content-type``.
    """
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        SIGNATURE_HEADER: signature_header(secrets, msg_id, timestamp, body),
        "content-type": "application/json",
    }


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now: int,
           tolerance_s: int = _DEFAULT_TOLERANCE_S) -> None:
    """Check a delivery as a receiver would (for Frontdoor's own tests and tools).

    Args:
        secret: The receiver's ``whsec_`` secret.
        headers: Request headers (names in any case).
        body: The body bytes received.
        now: The receiver's clock, Unix seconds.
        tolerance_s: How far ``webhook-timestamp`` may be from ``now`` either way.

    Raises:
        WebhookVerificationError: A header is missing, the timestamp is out of
            tolerance, or no ``v1`` signature matches.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp")
    signatures = lowered.get(SIGNATURE_HEADER)
    if not msg_id or not stamp or not signatures:
        raise WebhookVerificationError("missing webhook headers")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("invalid webhook-timestamp") from None
    if abs(now - timestamp) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp out of tolerance")
    expected = sign(secret, msg_id, timestamp, body).encode()
    for entry in signatures.split(" "):
        if entry.startswith("v1,") and hmac.compare_digest(entry.encode(), expected):
            return
    raise WebhookVerificationError("no matching signature")


def new_signing_key() -> tuple[str, str]:
    """Return a fresh Ed25519 pair: the ``whsk_`` private key and its ``whpk_`` public key."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                 serialization.NoEncryption())
    return SIGNING_KEY_PREFIX + base64.b64encode(seed).decode("ascii"), _public_text(private.public_key())


def _public_text(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def _raw(value: str, prefix: str) -> bytes:
    if not value.startswith(prefix):
        raise ValueError(f"an Ed25519 key starts with {prefix}")
    try:
        raw = base64.b64decode(value[len(prefix):], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"an Ed25519 key is {prefix} and base64") from None
    if len(raw) != _ED25519_BYTES:
        raise ValueError(f"an Ed25519 key holds {_ED25519_BYTES} bytes")
    return raw


def _private(signing_key: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(_raw(signing_key, SIGNING_KEY_PREFIX))


def public_key_of(signing_key: str) -> str:
    """The ``whpk_`` public key of a ``whsk_`` private key.

    Raises:
        ValueError: The key is malformed (the message never contains it).
    """
    return _public_text(_private(signing_key).public_key())


def sign_v1a(signing_key: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Sign one delivery with Ed25519 (Standard Webhooks' asymmetric scheme).

    Returns:
        ``v1a,<base64 signature>`` over ``{msg_id}.{timestamp}.{body}``.

    Raises:
        ValueError: The key is malformed (the message never contains it).
    """
    content = f"{msg_id}.{timestamp}.".encode() + body
    return "v1a," + base64.b64encode(_private(signing_key).sign(content)).decode("ascii")


def verify_v1a(public_key: str, headers: Mapping[str, str], body: bytes, *, now: int,
               tolerance_s: int = _DEFAULT_TOLERANCE_S) -> None:
    """Check a delivery's ``v1a`` signature with the endpoint's ``whpk_`` public key.

    Raises:
        WebhookVerificationError: A header is missing, the timestamp is out of
            tolerance, or no ``v1a`` signature verifies.
        ValueError: ``public_key`` is malformed.
    """
    key = Ed25519PublicKey.from_public_bytes(_raw(public_key, PUBLIC_KEY_PREFIX))
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp")
    signatures = lowered.get(SIGNATURE_HEADER)
    if not msg_id or not stamp or not signatures:
        raise WebhookVerificationError("missing webhook headers")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("invalid webhook-timestamp") from None
    if abs(now - timestamp) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp out of tolerance")
    content = f"{msg_id}.{timestamp}.".encode() + body
    for entry in signatures.split(" "):
        version, _, encoded = entry.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(encoded, validate=True), content)
        except (InvalidSignature, binascii.Error, ValueError):
            continue
        return
    raise WebhookVerificationError("no matching signature")
