"""Pure rules: response classification, endpoint URLs, the event catalogue, message bodies, redaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from frontdoor_core.errors import Invalid
from frontdoor_webhooks import (
    EVENT_TYPES,
    PERFORM,
    ErrorClass,
    Verdict,
    build_body,
    classify,
    redacted_headers,
    status_error_class,
    validate_endpoint_url,
    validate_event_types,
)


@pytest.mark.parametrize(("status", "headers", "verdict"), [
    (200, {}, Verdict.DELIVERED),
    (204, {}, Verdict.DELIVERED),
    (299, {"webhook-delivery": "abort"}, Verdict.DELIVERED),
    (None, {}, Verdict.RETRY),
    (500, {}, Verdict.RETRY),
    (503, {"retry-after": "5"}, Verdict.RETRY),
    (429, {}, Verdict.RETRY),
    (400, {}, Verdict.RETRY),
    (404, {}, Verdict.RETRY),
    (301, {}, Verdict.RETRY),
    (410, {}, Verdict.GONE),
    (410, {"webhook-delivery": "abort"}, Verdict.GONE),
    (400, {"webhook-delivery": "abort"}, Verdict.ABORT),
    (500, {"webhook-delivery": " Abort "}, Verdict.ABORT),
    (500, {"webhook-delivery": "retry"}, Verdict.RETRY),
])
def test_classify(status: int | None, headers: dict[str, str], verdict: Verdict) -> None:
    assert classify(status, headers) is verdict


@pytest.mark.parametrize(("status", "error"), [
    (200, None), (204, None), (302, ErrorClass.HTTP_3XX), (404, ErrorClass.HTTP_4XX), (429, ErrorClass.HTTP_4XX),
    (502, ErrorClass.HTTP_5XX), (101, ErrorClass.INVALID_RESPONSE), (700, ErrorClass.INVALID_RESPONSE),
])
def test_status_error_class(status: int, error: ErrorClass | None) -> None:
    assert status_error_class(status) == error


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/frontdoor",
    "https://hooks.example.com:8443/a?b=c",
    "  https://hooks.example.com/x  ",
])
def test_good_urls(url: str) -> None:
    assert validate_endpoint_url(url) == url.strip()


@pytest.mark.parametrize(("url", "reason"), [
    ("http://hooks.example.com/x", "https"),
    ("http://127.0.0.1:9000/x", "https"),
    ("ftp://hooks.example.com/x", "https"),
    ("https://user:pw@hooks.example.com/x", "credentials"),
    ("https://user@hooks.example.com/x", "credentials"),
    ("https://hooks.example.com/x#frag", "fragment"),
    ("https://hooks.example.com/a b", "whitespace"),
    ("https://hooks.example.com:99999/x", "parsed"),
    ("https://", "characters"),
    ("https://hooks.example.com/" + "a" * 2048, "characters"),
    ("/relative/path/only", "https"),
])
def test_bad_urls(url: str, reason: str) -> None:
    with pytest.raises(Invalid) as info:
        validate_endpoint_url(url)
    assert info.value.code == "invalid_url"
    assert reason in info.value.fields["url"]


def test_http_only_to_loopback_and_only_when_allowed() -> None:
    assert validate_endpoint_url("http://127.0.0.1:9000/hook", allow_insecure=True)
    assert validate_endpoint_url("http://localhost:9000/hook", allow_insecure=True)
    assert validate_endpoint_url("http://[::1]:9000/hook", allow_insecure=True)
    with pytest.raises(Invalid):
        validate_endpoint_url("http://hooks.example.com/hook", allow_insecure=True)


def test_event_catalogue() -> None:
    assert len(EVENT_TYPES) == 18 and len(set(EVENT_TYPES)) == 18
    assert "billing.payment_failed" in EVENT_TYPES  # a failed payment for the plan (docs/billing.md)
    assert "conversation.message.created" in EVENT_TYPES  # hosted conversations (PAP §7)
    assert "conversation.handoff_requested" in EVENT_TYPES  # an agent asked for a person (PAP §7.9)
    assert PERFORM not in EVENT_TYPES
    assert validate_event_types(["session.signed_in", "operation.proposed", "session.signed_in"]) == [
        "operation.proposed", "session.signed_in"]
    assert validate_event_types([]) == []
    with pytest.raises(Invalid) as info:
        validate_event_types(["operation.perform", "nope"])
    assert "nope" in info.value.fields["event_types"] and "operation.perform" in info.value.fields["event_types"]


def test_body_is_compact_json_with_utc_z_time() -> None:
    moment = datetime(2026, 12, 1, 13, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    body = build_body("operation.confirmed", {"id": "op_1", "n": 1}, moment)
    assert body == '{"type":"operation.confirmed","timestamp":"2026-12-01T12:00:00.123Z","data":{"id":"op_1","n":1}}'
    assert msgspec.json.decode(body)["timestamp"].endswith("Z")
    assert build_body("x", {}, datetime(2026, 1, 1, tzinfo=UTC)).startswith('{"type":"x"')


def test_redacted_headers_hide_every_signature() -> None:
    headers = {"webhook-id": "msg_1", "Webhook-Signature": "v1,abc v1,def", "content-type": "application/json"}
    assert redacted_headers(headers) == {"webhook-id": "msg_1", "Webhook-Signature": "[redacted]",
                                         "content-type": "application/json"}


@pytest.mark.parametrize("url", [
    "https://127.1/hook",
    "https://2130706433/hook",
    "https://0x7f000001/hook",
    "https://0177.0.0.1/hook",
    "https://127.0.0.1./hook",
    "https://１２７.０.０.１/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://[::ffff:7f00:1]/hook",
    "https://10.0.0.7/hook",
    "https://169.254.169.254/latest/meta-data/",
    "https://localhost/hook",
    "https://[::1]/hook",
])
def test_urls_that_can_never_be_delivered_are_refused_at_registration(url: str) -> None:
    with pytest.raises(Invalid) as info:
        validate_endpoint_url(url)
    assert info.value.code == "url_not_public"
    assert info.value.fields == {"url": "not a public address"}


@pytest.mark.parametrize(("url", "reason"), [
    ("https://134744072/hook", "non-canonical"),  # 8.8.8.8 in shorthand
    ("https://8.8.8.8./hook", "trailing dot"),
    ("https://hooks.example.com./hook", "trailing dot"),
    ("https://ho%6fks.example.com/hook", "percent"),
    ("gopher://hooks.example.com/hook", "https"),
    ("https://u@127.1/hook", "credentials"),
])
def test_non_canonical_hosts_are_invalid(url: str, reason: str) -> None:
    with pytest.raises(Invalid) as info:
        validate_endpoint_url(url)
    assert info.value.code == "invalid_url"
    assert reason in info.value.fields["url"]


def test_only_the_webhook_allowlist_lets_a_private_address_through() -> None:
    assert validate_endpoint_url("https://10.0.0.7/hook", allowlist=("10.0.0.0/8",)) == "https://10.0.0.7/hook"
    assert validate_endpoint_url("https://hooks.internal/x", allowlist=("hooks.internal",))
    with pytest.raises(Invalid):
        validate_endpoint_url("https://10.0.0.7/hook", allowlist=("192.168.0.0/16",))
