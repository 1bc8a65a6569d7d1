"""Standard Webhooks signatures: what we sign, the reference libraries verify."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest
import standardwebhooks
import svix.webhooks
from frontdoor_webhooks import (
    SIGNATURE_HEADER,
    WebhookVerificationError,
    new_secret,
    sign,
    signature_header,
    verify,
    webhook_headers,
)

BODY = b'{"type":"operation.confirmed","timestamp":"2026-12-01T00:00:00.000Z","data":{"id":"op_1"}}'
MSG = "msg_01JD00000000000000000000AA"


def test_new_secret_is_whsec_and_32_random_bytes() -> None:
    a, b = new_secret(), new_secret()
    assert a.startswith("whsec_") and a != b
    assert len(base64.b64decode(a.removeprefix("whsec_"))) == 32


def test_sign_is_hmac_sha256_of_id_timestamp_body_under_the_decoded_secret() -> None:
    secret = new_secret()
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, f"{MSG}.1700000000.".encode() + BODY, hashlib.sha256).digest())
    assert sign(secret, MSG, 1700000000, BODY) == "v1," + expected.decode()


def test_the_specification_example_signature() -> None:
    # The example of the Standard Webhooks specification (and its reference libraries' tests).
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    assert sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == (
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


@pytest.mark.parametrize("library", ["standardwebhooks", "svix"])
def test_reference_libraries_accept_our_signature_and_reject_a_tampered_body(library: str) -> None:
    secret = new_secret()
    headers = webhook_headers([secret], MSG, int(time.time()), BODY)
    verifier = standardwebhooks.Webhook(secret) if library == "standardwebhooks" else svix.webhooks.Webhook(secret)
    verifier.verify(BODY, headers)
    error = standardwebhooks.WebhookVerificationError if library == "standardwebhooks" else svix.webhooks.WebhookVerificationError
    with pytest.raises(error):
        verifier.verify(BODY.replace(b"op_1", b"op_2"), headers)
    with pytest.raises(error):
        verifier.verify(BODY, {**headers, "webhook-id": "msg_other"})


@pytest.mark.parametrize("library", ["standardwebhooks", "svix"])
def test_two_secret_header_verifies_with_either_secret(library: str) -> None:
    old, new = new_secret(), new_secret()
    headers = webhook_headers([new, old], MSG, int(time.time()), BODY)
    assert len(headers[SIGNATURE_HEADER].split(" ")) == 2
    for secret in (old, new):
        verifier = standardwebhooks.Webhook(secret) if library == "standardwebhooks" else svix.webhooks.Webhook(secret)
        verifier.verify(BODY, headers)
    stranger = new_secret()
    with pytest.raises(Exception, match="signature"):
        standardwebhooks.Webhook(stranger).verify(BODY, headers)


def test_webhook_headers_shape() -> None:
    secret = new_secret()
    headers = webhook_headers([secret], MSG, 1700000000, BODY)
    assert headers == {
        "webhook-id": MSG,
        "webhook-timestamp": "1700000000",
        "webhook-signature": sign(secret, MSG, 1700000000, BODY),
        "content-type": "application/json",
    }


def test_signature_header_needs_a_secret_and_refuses_malformed_ones_without_echoing() -> None:
    with pytest.raises(ValueError, match="at least one"):
        signature_header([], MSG, 1, BODY)
    with pytest.raises(ValueError) as info:
        sign("not-a-secret-value", MSG, 1, BODY)
    assert "not-a-secret-value" not in str(info.value)
    with pytest.raises(ValueError, match="24 to 64"):
        sign("whsec_" + base64.b64encode(b"short").decode(), MSG, 1, BODY)
    with pytest.raises(ValueError, match="base64"):
        sign("whsec_!!!!", MSG, 1, BODY)


def test_verify_checks_signature_and_tolerance() -> None:
    secret, other = new_secret(), new_secret()
    headers = webhook_headers([other, secret], MSG, 1_000_000, BODY)
    verify(secret, headers, BODY, now=1_000_000 + 299)
    verify(secret, {k.upper(): v for k, v in headers.items()}, BODY, now=1_000_000)
    with pytest.raises(WebhookVerificationError, match="tolerance"):
        verify(secret, headers, BODY, now=1_000_000 + 301)
    with pytest.raises(WebhookVerificationError, match="tolerance"):
        verify(secret, headers, BODY, now=1_000_000 - 301)
    with pytest.raises(WebhookVerificationError, match="no matching"):
        verify(secret, headers, BODY + b" ", now=1_000_000)
    with pytest.raises(WebhookVerificationError, match="no matching"):
        verify(new_secret(), headers, BODY, now=1_000_000)
    with pytest.raises(WebhookVerificationError, match="missing"):
        verify(secret, {"webhook-id": MSG}, BODY, now=1_000_000)
    with pytest.raises(WebhookVerificationError, match="timestamp"):
        verify(secret, {**headers, "webhook-timestamp": "soon"}, BODY, now=1_000_000)


@pytest.mark.parametrize("bad", ["whsec_!!!!", "whsec_" + base64.b64encode(b"k" * 16).decode(),
                                 "whsec_" + base64.b64encode(b"k" * 65).decode(), "whsk_" + "A" * 43 + "="])
def test_the_dispatcher_and_the_sdk_refuse_a_secret_with_the_same_words(bad: str) -> None:
    # One parser (frontdoor_protocol.parse_secret) behind signing and the sdk's WebhookVerifier.
    from frontdoor_protocol import parse_secret
    from frontdoor_sdk import WebhookVerifier

    messages = set()
    for use in (lambda: sign(bad, MSG, 1, BODY), lambda: WebhookVerifier(bad), lambda: parse_secret(bad)):
        with pytest.raises(ValueError) as info:
            use()
        messages.add(str(info.value))
    assert len(messages) == 1 and bad.partition("_")[2][:6] not in messages.pop()
