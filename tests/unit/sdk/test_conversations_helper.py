"""FrontdoorConversations against a fake ledger (httpx.MockTransport): a verified
``conversation.message.created`` delivery, replies, deltas, hand off and back, refusals."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest
from frontdoor_sdk import (
    FrontdoorConversations,
    LedgerCredentialRefused,
    LedgerRefused,
    LedgerUnavailable,
    WebhookVerificationError,
    WebhookVerifier,
    sign_webhook,
)

from tests.unit.sdk.kit import CLIENT_ID, CREDENTIAL

LEDGER = "https://ledger.frontdoor.test/acme"
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
DATA = {"conversation_id": "cnv_1", "parent_conversation_id": None, "event_id": "evt_1",
        "message": {"id": "m1", "sender": "human", "role": "user", "text": "Where is my parcel?"},
        "session_id": "ses_1", "client_id": CLIENT_ID, "user_id": "usr_1", "account": None, "scopes": [],
        "responder": "agent", "status": "working", "sequence": 1}


def helper(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[FrontdoorConversations, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(record))
    verifier = WebhookVerifier(SECRET, clock=lambda: NOW)
    return FrontdoorConversations(LEDGER, CREDENTIAL, verifier=verifier, http=http), seen


def delivery(event_type: str = "conversation.message.created", data: dict | None = None,  # type: ignore[type-arg]
             msg_id: str = "msg_hook1") -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"type": event_type, "timestamp": "2026-12-01T10:00:00.000Z",
                       "data": DATA if data is None else data}).encode()
    stamp = int(NOW.timestamp())
    return body, {"webhook-id": msg_id, "webhook-timestamp": str(stamp),
                  "webhook-signature": sign_webhook(SECRET, msg_id, stamp, body)}


async def test_verify_answers_the_users_message_and_marks_retries() -> None:
    conversations, _ = helper(lambda r: httpx.Response(500))
    body, headers = delivery()
    message = await conversations.verify(body, headers)
    assert message is not None and message.conversation_id == "cnv_1" and message.text == "Where is my parcel?"
    assert message.duplicate is False and message.webhook_id == "msg_hook1" and message.account is None
    again = await conversations.verify(body, headers)
    assert again is not None and again.duplicate is True
    other, other_headers = delivery("operation.succeeded", {"operation_id": "op_1"}, msg_id="msg_hook2")
    assert await conversations.verify(other, other_headers) is None
    with pytest.raises(WebhookVerificationError):
        await conversations.verify(body.replace(b"parcel", b"refund"), headers)  # tampered


async def test_reply_delta_hand_off_and_refusals() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/messages"):
            sent = json.loads(request.content)
            return httpx.Response(201, json={"conversation": {"conversation_id": "cnv_1"},
                                             "message": {**sent["message"], "sender": sent["sender"],
                                                         "role": "company"}})
        if path.endswith("/deltas"):
            return httpx.Response(202, json={"accepted": True})
        if path.endswith("/close"):
            return httpx.Response(409, json={"error": "conversation_closed", "error_description": "Closed."})
        if path.endswith("/authorization"):
            return httpx.Response(429, headers={"Retry-After": "7"}, json={"error": "rate_limited"})
        return httpx.Response(200, json={"conversation": {"conversation_id": "cnv_1", "responder": "human"}})

    conversations, seen = helper(answer)
    await conversations.delta("cnv_1", "re_1", "Looking")
    recorded = await conversations.reply("cnv_1", "It left today.", message_id="re_1")
    assert recorded == {"id": "re_1", "text": "It left today.", "sender": "agent", "role": "company"}
    assert (await conversations.hand_off("cnv_1"))["conversation"]["responder"] == "human"
    assert [(r.method, r.url.path) for r in seen] == [
        ("POST", "/acme/v1/conversations/cnv_1/deltas"), ("POST", "/acme/v1/conversations/cnv_1/messages"),
        ("POST", "/acme/v1/conversations/cnv_1/responder")]
    assert all(r.headers["authorization"] == f"Bearer {CREDENTIAL}" for r in seen)
    assert json.loads(seen[0].content) == {"message_id": "re_1", "text": "Looking"}
    assert json.loads(seen[1].content) == {"message": {"id": "re_1", "text": "It left today."}, "sender": "agent",
                                           "done": True}
    assert json.loads(seen[2].content) == {"responder": "human"}
    with pytest.raises(LedgerRefused) as refused:
        await conversations.close("cnv_1")
    assert refused.value.code == "conversation_closed" and refused.value.status == 409
    with pytest.raises(LedgerUnavailable) as busy:
        await conversations.ask_sign_in("cnv_1", "orders:read")
    assert busy.value.retry_after == 7
    with pytest.raises(ValueError):
        await conversations.reply("../other", "x")  # never a path of its own
    with pytest.raises(ValueError):
        await conversations.reply("cnv_1")
    assert CREDENTIAL not in repr(conversations)


async def test_a_refused_credential_is_said_so() -> None:
    conversations, _ = helper(lambda r: httpx.Response(401, json={"error": "invalid_credential"}))
    with pytest.raises(LedgerCredentialRefused):
        await conversations.read("cnv_1")


async def test_the_message_names_its_caller_and_a_reply_carries_an_operation() -> None:
    conversations, seen = helper(lambda r: httpx.Response(201, json={"conversation": {}, "message": {"id": "re_1"}}))
    body, headers = delivery(data={**DATA, "account": "acct_ada", "scopes": ["orders:read"]})
    event = await WebhookVerifier(SECRET, clock=lambda: NOW).verify(body, headers)
    message = FrontdoorConversations.message_of(event)  # verified elsewhere: one endpoint, several types
    assert message is not None and message.conversation_id == "cnv_1"
    caller = message.caller
    assert (caller.client_id, caller.user_id, caller.frontdoor_session_id) == (CLIENT_ID, "usr_1", "ses_1")
    assert caller.signed_in and caller.account == "acct_ada" and caller.has_scopes("orders:read")
    signed_out = FrontdoorConversations.message_of(
        await WebhookVerifier(SECRET, clock=lambda: NOW).verify(*delivery(data={**DATA, "scopes": ["x"]})))
    assert signed_out is not None and not signed_out.caller.signed_in and signed_out.caller.scopes == frozenset()
    other = await WebhookVerifier(SECRET, clock=lambda: NOW).verify(*delivery("session.signed_in", {}, "msg_2"))
    assert FrontdoorConversations.message_of(other) is None
    await conversations.reply("cnv_1", "Proposed.", message_id="re_1", operation_id="op_1")
    assert json.loads(seen[-1].content)["message"] == {"id": "re_1", "text": "Proposed.", "operation_id": "op_1"}
