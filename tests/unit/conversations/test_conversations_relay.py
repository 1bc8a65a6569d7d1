"""The relay mode's contract without I/O: what a company's answer may be (docs/conversations.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_conversations.relay import (
    MAX_RELAY_EVENTS,
    MAX_RELAY_MESSAGES,
    RELAY_EVENT_TYPE,
    RelayAnswer,
    RelayDelta,
    RelayFailed,
    read_answer,
    relay_policy,
)
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.messages import build_body
from frontdoor_webhooks.retry_policy import RetryPolicy, next_attempt_at


def _answer(body: object, status: int = 200) -> RelayAnswer:
    return read_answer(status, json.dumps(body).encode())


def test_replies_are_read_in_order_with_done_and_handoff() -> None:
    answer = _answer({"messages": [{"id": "a1", "text": "Hi"}, {"data": {"k": 1}}], "done": False, "handoff": True})
    assert [(m.id, m.text, m.data) for m in answer.messages] == [("a1", "Hi", None), (None, None, {"k": 1})]
    assert answer.done is False and answer.handoff is True
    defaults = _answer({})
    assert defaults.messages == [] and defaults.done is True and defaults.handoff is False


@pytest.mark.parametrize("status", [202, 204])
def test_accepted_means_nothing_now(status: int) -> None:
    answer = read_answer(status, b"")
    assert answer.messages == [] and answer.done is False


@pytest.mark.parametrize(("status", "body"), [
    (500, b"{}"), (301, b""), (200, b"not json"), (200, b"[]"),
    (200, json.dumps({"messages": [{"text": "x", "role": "system"}]}).encode()),  # never sets role
    (200, json.dumps({"messages": [{"text": "x"}], "sender": "human"}).encode()),
    (200, json.dumps({"messages": [{"id": "no spaces", "text": "x"}]}).encode()),
    (200, json.dumps({"messages": [{"id": "empty"}]}).encode()),
    (200, json.dumps({"messages": [{"text": "x" * 16_400}]}).encode()),
    (200, json.dumps({"messages": [{"text": "x"}] * (MAX_RELAY_MESSAGES + 1)}).encode()),
])
def test_anything_else_is_a_failure(status: int, body: bytes) -> None:
    with pytest.raises(RelayFailed):
        read_answer(status, body)


def test_a_truncated_answer_is_a_failure() -> None:
    with pytest.raises(RelayFailed):
        read_answer(200, b'{"messages": []}', truncated=True)


def test_the_request_is_a_standard_webhooks_event_of_the_relay_type() -> None:
    body = json.loads(build_body(RELAY_EVENT_TYPE, {"conversation_id": "cnv_1"},
                                 datetime(2026, 12, 2, 14, 30, tzinfo=UTC)))
    assert body == {"type": "conversation.relay", "timestamp": "2026-12-02T14:30:00.000Z",
                    "data": {"conversation_id": "cnv_1"}}


def test_authorization_and_text_delta_events_are_read_in_order() -> None:
    """PAP-7.11-01 (authorization, recorded) and §7.6 (text-delta, display only) in a relay answer."""
    answer = _answer({"messages": [{"id": "r1", "text": "Please sign in."}], "events": [
        {"type": "text-delta", "message_id": "r1", "text": "Please "},
        {"type": "authorization", "scope": "orders:read"},
        {"type": "authorization", "scope": "orders:write", "error": "insufficient_scope"}]})
    assert answer.authorizations == [
        {"type": "authorization", "error": "sign_in_required", "scope": "orders:read"},
        {"type": "authorization", "error": "insufficient_scope", "scope": "orders:write"}]
    assert answer.deltas == [RelayDelta(message_id="r1", text="Please ")]


@pytest.mark.parametrize("event", [
    {"type": "text-delta", "message_id": "r1", "text": ""},
    {"type": "text-delta", "message_id": "r1", "text": "x" * 4001},
    {"type": "text-delta", "message_id": "not an id", "text": "x"},
    {"type": "text-delta", "text": "x"},
    {"type": "authorization", "scope": "  "},
    {"type": "authorization", "scope": "s" * 1001},
    {"type": "authorization", "scope": "orders:read", "error": "invalid_token"},
    {"type": "authorization", "scope": "orders:read", "extra": 1},
    {"type": "state", "status": "closed"},  # only the company's own events: never a state change
    {"type": "message", "message": {"text": "x"}},
])
def test_an_event_the_rules_refuse_fails_the_answer(event: dict[str, object]) -> None:
    with pytest.raises(RelayFailed):
        _answer({"messages": [], "events": [event]})


def test_too_many_events_fail_the_answer() -> None:
    with pytest.raises(RelayFailed):
        _answer({"events": [{"type": "authorization", "scope": "a"}] * (MAX_RELAY_EVENTS + 1)})


def test_a_relay_has_one_attempt_whatever_the_webhook_schedule() -> None:
    policy = DeliveryPolicy(retry=RetryPolicy(schedule=(timedelta(0), timedelta(seconds=5), timedelta(minutes=5))))
    relay = relay_policy(policy)
    assert relay.retry.max_attempts == 1
    assert (relay.timeout, relay.lease, relay.disable_after) == (policy.timeout, policy.lease, policy.disable_after)
    now = datetime(2026, 12, 2, tzinfo=UTC)
    assert next_attempt_at(1, now, relay.retry) is None  # the first failure is final
    assert next_attempt_at(2, now, relay.retry) is None  # also after an attempt that never settled
