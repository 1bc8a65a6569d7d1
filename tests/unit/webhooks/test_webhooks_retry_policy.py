"""The retry schedule: exhaustion, jitter bounds, Retry-After lengthening and its cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from frontdoor_core.settings import load_settings
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy, next_attempt_at, parse_retry_after
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SCHEDULE = (timedelta(0), timedelta(seconds=5), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2))


def _policy(jitter: float = 0.1, cap: timedelta = timedelta(hours=1)) -> RetryPolicy:
    return RetryPolicy(schedule=SCHEDULE, jitter=jitter, retry_after_max=cap)


def test_each_failure_waits_for_the_next_entry_then_the_message_is_exhausted() -> None:
    policy = _policy(jitter=0)
    assert [next_attempt_at(n, NOW, policy) for n in range(1, 6)] == [
        NOW + timedelta(seconds=5), NOW + timedelta(minutes=5), NOW + timedelta(minutes=30), NOW + timedelta(hours=2),
        None,
    ]
    assert policy.max_attempts == 5
    with pytest.raises(ValueError, match="at least 1"):
        next_attempt_at(0, NOW, policy)


def test_jitter_extremes_come_from_the_random_source() -> None:
    policy = _policy(jitter=0.1)
    assert next_attempt_at(2, NOW, policy, rand=lambda: 0.0) == NOW + timedelta(minutes=4, seconds=30)
    assert next_attempt_at(2, NOW, policy, rand=lambda: 0.5) == NOW + timedelta(minutes=5)
    assert next_attempt_at(2, NOW, policy, rand=lambda: 0.9999999) <= NOW + timedelta(minutes=5, seconds=30)


@given(attempts=st.integers(min_value=1, max_value=10), jitter=st.floats(min_value=0, max_value=0.99),
       r=st.floats(min_value=0, max_value=1, exclude_max=True),
       retry_after_s=st.one_of(st.none(), st.integers(min_value=0, max_value=10**7)),
       cap_s=st.integers(min_value=0, max_value=86400))
def test_next_attempt_stays_within_bounds(attempts: int, jitter: float, r: float, retry_after_s: int | None,
                                          cap_s: int) -> None:
    policy = _policy(jitter=jitter, cap=timedelta(seconds=cap_s))
    retry_after = None if retry_after_s is None else timedelta(seconds=retry_after_s)
    when = next_attempt_at(attempts, NOW, policy, retry_after=retry_after, rand=lambda: r)
    if attempts >= len(SCHEDULE):
        assert when is None
        return
    assert when is not None
    scheduled = SCHEDULE[attempts]
    low = scheduled * (1 - jitter) - timedelta(microseconds=1)
    high = max(scheduled * (1 + jitter), min(retry_after or timedelta(0), policy.retry_after_max))
    assert low <= when - NOW <= high + timedelta(microseconds=1)
    if retry_after is not None:
        # never sooner than the receiver asked, up to the cap
        assert when - NOW >= min(retry_after, policy.retry_after_max)


def test_retry_after_lengthens_but_never_shortens_and_is_capped() -> None:
    policy = _policy(jitter=0, cap=timedelta(minutes=10))
    assert next_attempt_at(1, NOW, policy, retry_after=timedelta(seconds=1)) == NOW + timedelta(seconds=5)
    assert next_attempt_at(1, NOW, policy, retry_after=timedelta(seconds=120)) == NOW + timedelta(seconds=120)
    assert next_attempt_at(1, NOW, policy, retry_after=timedelta(days=3)) == NOW + timedelta(minutes=10)
    assert next_attempt_at(5, NOW, policy, retry_after=timedelta(seconds=1)) is None


@pytest.mark.parametrize(("value", "expected"), [
    ("120", timedelta(seconds=120)),
    (" 0 ", timedelta(0)),
    ("Tue, 01 Dec 2026 12:02:00 GMT", timedelta(minutes=2)),
    ("Tue, 01 Dec 2026 11:00:00 GMT", timedelta(0)),
    ("soon", None),
    ("-5", None),
    ("", None),
    (None, None),
])
def test_parse_retry_after(value: str | None, expected: timedelta | None) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize("kwargs", [
    {"schedule": ()},
    {"schedule": (timedelta(seconds=-1),)},
    {"schedule": SCHEDULE, "jitter": 1.0},
    {"schedule": SCHEDULE, "jitter": -0.1},
    {"schedule": SCHEDULE, "retry_after_max": timedelta(seconds=-1)},
])
def test_nonsensical_policies_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_delivery_policy_from_settings_and_lease_rule() -> None:
    settings = load_settings({"FRONTDOOR_ENV": "test", "FRONTDOOR_WEBHOOK_RETRY_SCHEDULE": "0s,1s,2m",
                              "FRONTDOOR_WEBHOOK_TIMEOUT": "7s"})
    policy = DeliveryPolicy.from_settings(settings)
    assert policy.retry.schedule == (timedelta(0), timedelta(seconds=1), timedelta(minutes=2))
    assert policy.timeout == timedelta(seconds=7)
    assert policy.lease > policy.timeout
    assert policy.disable_after == settings.webhook_disable_after
    with pytest.raises(ValueError, match="lease"):
        DeliveryPolicy(retry=policy.retry, timeout=timedelta(seconds=10), lease=timedelta(seconds=10))
