"""The delivery bench's company-like receiver (``bench/_receiver_app.py``) and its ``--receiver`` flag.

The app runs under granian in its own process, as the bench starts it; the checks are on
the wire (status, body) and on what it recorded (the counts the bench's correctness
checks read). No timing is asserted.
"""

from __future__ import annotations

import time

import httpx
import pytest

from bench import delivery_throughput


def test_the_receiver_flag_defaults_to_both_and_refuses_others() -> None:
    assert delivery_throughput.parse_args([]).receiver == "both"
    assert delivery_throughput.parse_args(["--receiver", "app"]).receiver == "app"
    with pytest.raises(SystemExit):
        delivery_throughput.parse_args(["--receiver", "httpx"])


def test_the_app_receiver_verifies_with_the_sdk_and_counts_per_webhook_id() -> None:
    from frontdoor_webhooks.signing import new_secret, webhook_headers

    from bench._receiver_app import AppReceiverProcess

    receiver = AppReceiverProcess()
    try:
        secret = new_secret()
        receiver.control("x", secret=secret, body="{}")
        body = b'{"type":"operation.succeeded","timestamp":"2026-01-01T00:00:00.000Z","data":{"idempotency_key":"k1"}}'
        for msg_id in ("msg_1", "msg_1", "msg_2"):  # msg_1 twice: a retry, accepted and counted twice
            answer = httpx.post(receiver.hook_url("x"), content=body,
                                headers=webhook_headers([secret], msg_id, int(time.time()), body))
            assert (answer.status_code, answer.content) == (200, b"{}")
        tampered = httpx.post(receiver.hook_url("x"), content=body + b" ",
                              headers=webhook_headers([secret], "msg_3", int(time.time()), body))
        assert tampered.status_code == 401 and tampered.json()["reason"] == "bad_signature"
        other = httpx.post(receiver.hook_url("x"), content=body,
                           headers=webhook_headers([new_secret()], "msg_4", int(time.time()), body))
        assert other.status_code == 401
        stale = httpx.post(receiver.hook_url("x"), content=body,
                           headers=webhook_headers([secret], "msg_5", int(time.time()) - 3600, body))
        assert stale.status_code == 401 and stale.json()["reason"] == "too_old"

        stats = receiver.stats("x")
        assert (stats["raw"], stats["distinct_ids"], stats["bad_signatures"]) == (6, 5, 3)
        assert stats["keys_with_several_ids"] == ["k1"]  # k1 came under msg_1 and msg_2
        records = receiver.stats("x", records=True)["records"]
        assert [(r[0], r[3]) for r in records] == [("msg_1", True), ("msg_1", True), ("msg_2", True),
                                                   ("msg_3", False), ("msg_4", False), ("msg_5", False)]
        assert stats["first_arrival"] == records[0][2] and stats["last_arrival"] == records[-1][2]
        receiver.reset("x")  # forgets the records, keeps the secret
        assert receiver.stats("x")["raw"] == 0
        assert httpx.post(receiver.hook_url("x"), content=body + b" ",
                          headers=webhook_headers([secret], "msg_6", int(time.time()), body)).status_code == 401
    finally:
        receiver.stop()
