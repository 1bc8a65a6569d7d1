"""WebhookVerifier: Standard Webhooks signatures, cross-checked with the independent `standardwebhooks` package."""

from __future__ import annotations

import base64
import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from frontdoor_sdk import InMemoryReplayCache, WebhookVerificationError, WebhookVerifier, sign_webhook
from standardwebhooks import Webhook

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
OTHER = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
EVENT = {
    "type": "operation.perform",
    "timestamp": "2026-11-30T09:59:58Z",
    "data": {"idempotency_key": "op_1", "operation": {"operation_id": "op_1", "revision": 1}, "kind": "order.place",
             "account": "acct_1", "input": {"cart_id": "7f3a"}},
}


def clock() -> datetime:
    return NOW


def delivery(secret: str = SECRET, *, msg_id: str = "msg_1", at: datetime = NOW,
             payload: Any = EVENT) -> tuple[bytes, dict[str, str]]:
    """A delivery signed by the independent `standardwebhooks` implementation."""
    body = json.dumps(payload)
    signature = Webhook(secret).sign(msg_id, at, body)
    return body.encode(), {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())),
                           "webhook-signature": signature}


async def test_a_delivery_signed_by_standardwebhooks_verifies() -> None:
    body, headers = delivery()
    event = await WebhookVerifier(SECRET, clock=clock).verify(body, headers)
    assert (event.id, event.type, event.duplicate) == ("msg_1", "operation.perform", False)
    assert event.data == EVENT["data"]
    assert event.timestamp == datetime(2026, 11, 30, 9, 59, 58, tzinfo=UTC)
    assert event.sent_at == NOW


async def test_our_signature_verifies_with_standardwebhooks() -> None:
    body = json.dumps(EVENT).encode()
    headers = {"webhook-id": "msg_2", "webhook-timestamp": str(int(datetime.now(UTC).timestamp()))}
    headers["webhook-signature"] = sign_webhook(SECRET, "msg_2", int(headers["webhook-timestamp"]), body)
    assert Webhook(SECRET).verify(body, headers) == EVENT


async def test_a_tampered_body_is_refused() -> None:
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body.replace(b"op_1", b"op_2"), headers)
    assert (raised.value.reason, raised.value.status) == ("bad_signature", 401)


async def test_a_tampered_id_or_timestamp_is_refused() -> None:
    body, headers = delivery()
    verifier = WebhookVerifier(SECRET, clock=clock, tolerance=600)
    for name, value in (("webhook-id", "msg_other"), ("webhook-timestamp", str(int(NOW.timestamp()) - 1))):
        with pytest.raises(WebhookVerificationError) as raised:
            await verifier.verify(body, {**headers, name: value})
        assert raised.value.reason == "bad_signature"


@pytest.mark.parametrize(("offset", "reason"), [(-301, "too_old"), (301, "too_new")])
async def test_a_timestamp_out_of_tolerance_either_way_is_refused(offset: int, reason: str) -> None:
    body, headers = delivery(at=NOW + timedelta(seconds=offset))
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body, headers)
    assert raised.value.reason == reason


async def test_a_timestamp_within_tolerance_is_fine() -> None:
    body, headers = delivery(at=NOW - timedelta(seconds=299))
    assert (await WebhookVerifier(SECRET, clock=clock).verify(body, headers)).id == "msg_1"


async def test_a_wrong_secret_is_refused() -> None:
    body, headers = delivery(OTHER)
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body, headers)
    assert raised.value.reason == "bad_signature"


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
async def test_a_missing_header_is_refused(missing: str) -> None:
    body, headers = delivery()
    del headers[missing]
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body, headers)
    assert (raised.value.reason, raised.value.status) == ("missing_header", 400)


async def test_a_repeated_header_is_refused() -> None:
    body, headers = delivery()
    pairs = [*headers.items(), ("webhook-id", "msg_other")]
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body, pairs)
    assert raised.value.reason == "missing_header"


async def test_a_non_numeric_timestamp_is_refused() -> None:
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body, {**headers, "webhook-timestamp": "1e9"})
    assert raised.value.reason == "bad_timestamp"


async def test_several_signatures_and_several_secrets_during_rotation() -> None:
    body, headers = delivery(OTHER)
    new = sign_webhook(SECRET, "msg_1", NOW, body)
    rotated = {**headers, "webhook-signature": f"v1a,ignored {headers['webhook-signature']} {new}"}
    assert (await WebhookVerifier(SECRET, clock=clock).verify(body, rotated)).id == "msg_1"
    assert (await WebhookVerifier([SECRET, OTHER], clock=clock, replay_cache=None).verify(body, headers)).id == "msg_1"


async def test_a_retry_with_the_same_id_is_a_duplicate_not_a_refusal() -> None:
    verifier = WebhookVerifier(SECRET, clock=clock)
    first = await verifier.verify(*delivery())
    retry = await verifier.verify(*delivery(at=NOW + timedelta(seconds=5)))
    assert (first.duplicate, retry.duplicate) == (False, True)
    assert retry.data == first.data  # the same idempotency key: answer it from what you stored


async def test_duplicates_can_be_refused_or_not_tracked() -> None:
    strict = WebhookVerifier(SECRET, clock=clock, refuse_duplicates=True, replay_cache=InMemoryReplayCache(clock=clock))
    await strict.verify(*delivery())
    with pytest.raises(WebhookVerificationError) as raised:
        await strict.verify(*delivery())
    assert raised.value.reason == "duplicate"
    untracked = WebhookVerifier(SECRET, clock=clock, replay_cache=None)
    assert not (await untracked.verify(*delivery())).duplicate
    assert not (await untracked.verify(*delivery())).duplicate


@pytest.mark.parametrize("payload", [[1, 2], {"data": {}}, {"type": 3}])
async def test_a_signed_body_that_is_no_event_is_malformed(payload: Any) -> None:
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(*delivery(payload=payload))
    assert (raised.value.reason, raised.value.status) == ("malformed_body", 400)


async def test_a_large_body_is_refused_before_hashing() -> None:
    body, headers = delivery()
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock, max_body=10).verify(body, headers)
    assert raised.value.reason == "too_large"


async def test_the_asgi_helper_reads_the_body_in_chunks() -> None:
    body, headers = delivery()
    scope = {"type": "http", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    messages = [{"type": "http.request", "body": body[:10], "more_body": True},
                {"type": "http.request", "body": body[10:], "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    event = await WebhookVerifier(SECRET, clock=clock).verify_asgi(scope, receive)
    assert event.type == "operation.perform"


def test_secrets_are_checked_and_never_shown() -> None:
    for bad in ("", "whsec_not base64!", "whsec_" + base64.b64encode(b"short").decode()):
        with pytest.raises(ValueError) as raised:
            WebhookVerifier(bad)
        assert bad not in str(raised.value) or bad == ""
    with pytest.raises(ValueError):
        WebhookVerifier([])
    verifier = WebhookVerifier([SECRET, OTHER])
    assert SECRET not in repr(verifier) and "2 secret(s)" in repr(verifier)
    # A secret without the prefix is taken too, as Standard Webhooks libraries do.
    assert WebhookVerifier(SECRET.removeprefix("whsec_"))


@pytest.mark.parametrize("timestamp", ["²", "１２３", "-5", "12.5", ""])
async def test_a_non_ascii_or_malformed_timestamp_is_a_refusal_not_a_crash(timestamp: str) -> None:
    body, headers = delivery()
    headers["webhook-timestamp"] = timestamp
    with pytest.raises(WebhookVerificationError) as raised:
        await WebhookVerifier(SECRET, clock=clock).verify(body, headers)
    assert raised.value.status in (400, 401)
