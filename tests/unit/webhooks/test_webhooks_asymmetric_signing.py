"""Ed25519 ("v1a") signatures: an independent Ed25519 implementation verifies what we sign,
and the HMAC verifiers keep working beside it."""

from __future__ import annotations

import base64
import time

import pytest
import standardwebhooks
import svix.webhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from frontdoor_sdk import WebhookVerifier
from frontdoor_webhooks import (
    SIGNATURE_HEADER,
    WebhookVerificationError,
    new_secret,
    new_signing_key,
    public_key_of,
    sign_v1a,
    verify_v1a,
    webhook_headers,
)

BODY = b'{"type":"session.signed_in","timestamp":"2026-12-01T00:00:00.000Z","data":{"sequence":1}}'
MSG = "msg_01JD00000000000000000000AA"


def _public(whpk: str) -> Ed25519PublicKey:
    raw = base64.b64decode(whpk.removeprefix("whpk_"), validate=True)
    assert len(raw) == 32
    return Ed25519PublicKey.from_public_bytes(raw)


def test_key_pair_formats() -> None:
    private, public = new_signing_key()
    assert private.startswith("whsk_") and public.startswith("whpk_")
    assert public_key_of(private) == public
    assert new_signing_key()[1] != public


def test_v1a_signature_verifies_with_an_independent_ed25519_public_key() -> None:
    private, public = new_signing_key()
    stamp = 1_700_000_000
    entry = sign_v1a(private, MSG, stamp, BODY)
    version, _, encoded = entry.partition(",")
    assert version == "v1a"
    _public(public).verify(base64.b64decode(encoded), f"{MSG}.{stamp}.".encode() + BODY)
    with pytest.raises(InvalidSignature):
        _public(public).verify(base64.b64decode(encoded), f"{MSG}.{stamp}.".encode() + BODY + b" ")


def test_headers_carry_v1_and_v1a_and_every_verifier_accepts_its_own() -> None:
    secret = new_secret()
    private, public = new_signing_key()
    now = int(time.time())
    headers = webhook_headers([secret, private], MSG, now, BODY)
    entries = headers[SIGNATURE_HEADER].split(" ")
    assert [e.split(",")[0] for e in entries] == ["v1", "v1a"]
    verify_v1a(public, headers, BODY, now=now)
    standardwebhooks.Webhook(secret).verify(BODY, headers)  # the HMAC half, v1a ignored
    svix.webhooks.Webhook(secret).verify(BODY, headers)
    WebhookVerifier(secret).check_signature(BODY, headers)


def test_v1a_refusals() -> None:
    private, public = new_signing_key()
    _, other_public = new_signing_key()
    now = int(time.time())
    headers = webhook_headers([new_secret(), private], MSG, now, BODY)
    with pytest.raises(WebhookVerificationError):
        verify_v1a(other_public, headers, BODY, now=now)
    with pytest.raises(WebhookVerificationError):
        verify_v1a(public, headers, BODY + b"x", now=now)
    with pytest.raises(WebhookVerificationError):
        verify_v1a(public, headers, BODY, now=now + 3600)
    hmac_only = webhook_headers([new_secret()], MSG, now, BODY)
    with pytest.raises(WebhookVerificationError):
        verify_v1a(public, hmac_only, BODY, now=now)
    with pytest.raises(ValueError, match="whpk_"):
        verify_v1a("whsec_abc", headers, BODY, now=now)
