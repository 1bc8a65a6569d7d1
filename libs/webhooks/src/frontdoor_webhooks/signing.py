"""Standard Webhooks signing as the dispatcher does it: fresh secrets and keys, the headers of a delivery.

The scheme itself (secret and key formats, the signed content, ``v1`` HMAC-SHA256 and
``v1a`` Ed25519 signatures, the ``webhook-signature`` header, verification) is
:mod:`frontdoor_protocol.standard_webhooks`, the same code the sdk's ``WebhookVerifier``
uses; this module generates secrets and keys and assembles what goes on the wire.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from frontdoor_protocol import (
    DEFAULT_WEBHOOK_TOLERANCE,
    PUBLIC_KEY_PREFIX,
    SECRET_PREFIX,
    SIGNING_KEY_PREFIX,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    WebhookKeys,
    format_public_key,
    format_secret,
    format_signing_key,
    parse_signing_key,
    sign_v1,
    sign_v1a,
    signature_header,
    verify_webhook_signature,
)
from frontdoor_protocol import WebhookSignatureError as WebhookVerificationError

__all__ = [
    "PUBLIC_KEY_PREFIX",
    "SECRET_PREFIX",
    "SIGNATURE_HEADER",
    "SIGNING_KEY_PREFIX",
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

SIGNATURE_HEADER = WEBHOOK_SIGNATURE_HEADER
_SECRET_BYTES = 32

sign = sign_v1
"""``v1,<base64 HMAC-SHA256>`` of one delivery under a ``whsec_`` secret (see :func:`frontdoor_protocol.sign_v1`)."""


def new_secret() -> str:
    """Return a fresh endpoint secret: ``whsec_`` and the base64 of 32 random bytes."""
    return format_secret(os.urandom(_SECRET_BYTES))


def new_signing_key() -> tuple[str, str]:
    """Return a fresh Ed25519 pair: the ``whsk_`` private key and its ``whpk_`` public key."""
    private = Ed25519PrivateKey.generate()
    return format_signing_key(private), format_public_key(private.public_key())


def public_key_of(signing_key: str) -> str:
    """The ``whpk_`` public key of a ``whsk_`` private key.

    Raises:
        ValueError: The key is malformed (the message never contains it).
    """
    return format_public_key(parse_signing_key(signing_key).public_key())


def webhook_headers(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header that makes a request a Standard Webhooks delivery.

    Args:
        secrets: The endpoint's valid secrets (``whsec_`` and ``whsk_``), newest first.
        msg_id: The message ID (the same on every attempt, for receivers' idempotency).
        timestamp: Unix seconds of this attempt (fresh on every attempt).
        body: The exact body bytes.

    Returns:
        ``webhook-id``, ``webhook-timestamp``, ``webhook-signature`` and ``content-type``.

    Raises:
        ValueError: No secret, or a malformed one (the message never contains it).
    """
    return {
        WEBHOOK_ID_HEADER: msg_id,
        WEBHOOK_TIMESTAMP_HEADER: str(timestamp),
        WEBHOOK_SIGNATURE_HEADER: signature_header(secrets, msg_id, timestamp, body),
        "content-type": "application/json",
    }


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now: int,
           tolerance_s: int = DEFAULT_WEBHOOK_TOLERANCE) -> None:
    """Check a delivery's ``v1`` signature as a receiver would (for Frontdoor's own tests and tools).

    Raises:
        WebhookVerificationError: A header is missing, the timestamp is out of
            tolerance, or no ``v1`` signature matches.
        ValueError: ``secret`` is malformed.
    """
    verify_webhook_signature(WebhookKeys.parse(secrets=[secret]), headers, body, now=now, tolerance=tolerance_s)


def verify_v1a(public_key: str, headers: Mapping[str, str], body: bytes, *, now: int,
               tolerance_s: int = DEFAULT_WEBHOOK_TOLERANCE) -> None:
    """Check a delivery's ``v1a`` signature with the endpoint's ``whpk_`` public key.

    Raises:
        WebhookVerificationError: A header is missing, the timestamp is out of
            tolerance, or no ``v1a`` signature verifies.
        ValueError: ``public_key`` is malformed.
    """
    verify_webhook_signature(WebhookKeys.parse(public_keys=[public_key]), headers, body, now=now,
                             tolerance=tolerance_s)
