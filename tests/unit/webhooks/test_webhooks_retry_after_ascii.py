"""Retry-After delay-seconds are ASCII digits only (RFC 9110 §10.2.3); anything else is not a delay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_webhooks.retry_policy import parse_retry_after

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("value", ["²", "12²", "٣", "１２", "¹⁰", "1_000", "+5", "-5", "3.5", "", "   "])
def test_non_ascii_or_odd_digits_are_not_a_delay(value: str) -> None:
    assert parse_retry_after(value, NOW) is None


def test_ascii_seconds_and_huge_values_are_read() -> None:
    assert parse_retry_after(" 120 ", NOW) == timedelta(seconds=120)
    assert parse_retry_after("9" * 5000, NOW) == timedelta(seconds=10**9)  # no int() digit-limit error


def test_an_http_date_still_works() -> None:
    assert parse_retry_after("Tue, 01 Dec 2026 12:01:00 GMT", NOW) == timedelta(minutes=1)
    assert parse_retry_after("Tue, 01 Dec 9999999 12:01:00 GMT", NOW) is None
