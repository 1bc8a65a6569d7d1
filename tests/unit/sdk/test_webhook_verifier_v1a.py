"""WebhookVerifier with Ed25519 public keys: ``v1a`` signatures made by Frontdoor's own signing
code (frontdoor_webhooks.signing) verify with the ``whpk_`` key the management API shows."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_sdk import WebhookVerificationError, WebhookVerifier
from frontdoor_webhooks.signing import new_secret, new_signing_key, sign_v1a, webhook_headers

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
STAMP = int(NOW.timestamp())
MSG = "msg_01JD00000000000000000000AB"
BODY = json.dumps({"type": "session.signed_in", "timestamp": "2026-12-01T09:29:59.000Z",
                   "data": {"sequence": 7, "session_id": "ses_1"}}).encode()
PRIVATE, PUBLIC = new_signing_key()
OTHER_PRIVATE, OTHER_PUBLIC = new_signing_key()
SECRET = new_secret()


def clock() -> datetime:
    return NOW


def verifier(*, secrets: list[str] | None = None, public_keys: str | list[str] = PUBLIC) -> WebhookVerifier:
    return WebhookVerifier(secrets or [], public_keys=public_keys, clock=clock, replay_cache=None)


async def test_a_v1a_only_receiver_verifies_frontdoors_deliveries_with_the_public_key() -> None:
    for signed_with in ([SECRET, PRIVATE], [PRIVATE]):  # beside the v1 entry, or alone
        headers = webhook_headers(signed_with, MSG, STAMP, BODY)
        event = await verifier().verify(BODY, headers)
        assert (event.id, event.type, event.data["sequence"]) == (MSG, "session.signed_in", 7)
        assert event.sent_at == NOW


async def test_secrets_and_public_keys_together_accept_either_scheme() -> None:
    both = verifier(secrets=[SECRET], public_keys=[PUBLIC])
    for signed_with in ([SECRET], [PRIVATE], [new_secret(), PRIVATE], [SECRET, OTHER_PRIVATE]):
        assert both.check_signature(BODY, webhook_headers(signed_with, MSG, STAMP, BODY)) == (MSG, NOW)
    with pytest.raises(WebhookVerificationError) as raised:
        both.check_signature(BODY, webhook_headers([new_secret(), OTHER_PRIVATE], MSG, STAMP, BODY))
    assert raised.value.reason == "bad_signature"


async def test_during_a_key_rotation_either_public_key_verifies() -> None:
    headers = webhook_headers([SECRET, OTHER_PRIVATE, PRIVATE], MSG, STAMP, BODY)  # new and old key sign
    for keys in (PUBLIC, OTHER_PUBLIC, [OTHER_PUBLIC, PUBLIC]):
        assert verifier(public_keys=keys).check_signature(BODY, headers)[0] == MSG
    _, unrelated = new_signing_key()
    with pytest.raises(WebhookVerificationError) as raised:
        verifier(public_keys=unrelated).check_signature(BODY, headers)
    assert raised.value.reason == "bad_signature"


async def test_a_tampered_body_id_or_timestamp_is_refused() -> None:
    headers = webhook_headers([PRIVATE], MSG, STAMP, BODY)
    for body, changed in ((BODY + b" ", {}), (BODY, {"webhook-id": "msg_other"}),
                          (BODY, {"webhook-timestamp": str(STAMP - 1)})):
        with pytest.raises(WebhookVerificationError) as raised:
            verifier().check_signature(body, {**headers, **changed})
        assert raised.value.reason == "bad_signature"


async def test_the_timestamp_is_checked_for_v1a_too() -> None:
    stale = int((NOW - timedelta(seconds=301)).timestamp())
    with pytest.raises(WebhookVerificationError) as raised:
        await verifier().verify(BODY, webhook_headers([PRIVATE], MSG, stale, BODY))
    assert raised.value.reason == "too_old"


@pytest.mark.parametrize("entry", [
    "v1a,", "v1a,not base64!", "v1a," + base64.b64encode(b"\0" * 64).decode(), "v1a," + base64.b64encode(b"x").decode(),
    # an HMAC relabelled v1a, and a v1a signature relabelled v1: neither verifies
    "v1a," + webhook_headers([SECRET], MSG, STAMP, BODY)["webhook-signature"].removeprefix("v1,"),
    "v1," + sign_v1a(PRIVATE, MSG, STAMP, BODY).removeprefix("v1a,"),
], ids=["empty", "not-base64", "zero-signature", "short", "hmac-as-v1a", "ed25519-as-v1"])  # stable across workers
async def test_malformed_or_mislabelled_entries_never_verify(entry: str) -> None:
    headers = {"webhook-id": MSG, "webhook-timestamp": str(STAMP), "webhook-signature": entry}
    with pytest.raises(WebhookVerificationError) as raised:
        verifier(secrets=[SECRET]).check_signature(BODY, headers)
    assert raised.value.reason == "bad_signature"
    good = sign_v1a(PRIVATE, MSG, STAMP, BODY)
    assert verifier().check_signature(BODY, {**headers, "webhook-signature": f"{entry} {good}"})[0] == MSG


async def test_an_hmac_only_verifier_still_ignores_v1a_entries() -> None:
    headers = webhook_headers([PRIVATE], MSG, STAMP, BODY)
    with pytest.raises(WebhookVerificationError):
        WebhookVerifier(SECRET, clock=clock).check_signature(BODY, headers)
    assert WebhookVerifier(SECRET, clock=clock).check_signature(
        BODY, webhook_headers([SECRET, PRIVATE], MSG, STAMP, BODY))[0] == MSG


def test_public_keys_are_checked() -> None:
    short = "whpk_" + base64.b64encode(b"\1" * 31).decode()
    for bad in ("", "whpk_not base64!", short, SECRET, PRIVATE, PUBLIC.removeprefix("whpk_")):
        with pytest.raises(ValueError, match="public key"):
            WebhookVerifier(public_keys=bad)
    with pytest.raises(ValueError, match="public_keys="):
        WebhookVerifier(PUBLIC)  # a whpk_ key passed as a secret
    with pytest.raises(ValueError, match="at least one"):
        WebhookVerifier()
    with pytest.raises(ValueError, match="at least one"):
        WebhookVerifier([], public_keys=[])
    shown = repr(WebhookVerifier(SECRET, public_keys=[PUBLIC, OTHER_PUBLIC]))
    assert "1 secret(s), 2 public key(s)" in shown and SECRET not in shown
