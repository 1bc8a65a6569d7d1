"""The relay mode's contract without I/O: what a company's answer may be (docs/conversations.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from frontdoor_conversations.relay import (
    MAX_RELAY_MESSAGES,
    RelayAnswer,
    RelayFailed,
    read_answer,
    relay_body,
    relay_message_id,
)


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


def test_the_request_is_a_standard_webhooks_event_named_by_the_message_event() -> None:
    body = json.loads(relay_body({"conversation_id": "cnv_1"}, datetime(2026, 12, 2, 14, 30, tzinfo=UTC)))
    assert body == {"type": "conversation.relay", "timestamp": "2026-12-02T14:30:00.000Z",
                    "data": {"conversation_id": "cnv_1"}}
    assert relay_message_id("evt_1") == "rly_evt_1"
