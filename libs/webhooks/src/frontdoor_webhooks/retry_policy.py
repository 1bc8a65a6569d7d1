"""When a failed delivery is tried again: the schedule, jitter and the receiver's Retry-After.

The schedule lists the delay before each attempt, the first attempt included (it is
sent when the message is written, so its entry is conventionally ``0s``); after the last
one fails the message is exhausted. Each delay is spread by up to ``jitter`` either way,
so endpoints that failed together do not all retry in the same second. A receiver's
``Retry-After`` (RFC 9110 §10.2.3: seconds or an HTTP-date) can lengthen a delay, never
shorten it, and is capped at ``retry_after_max``. Pure: the clock and the random source
are passed in.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import msgspec

__all__ = ["RetryPolicy", "next_attempt_at", "parse_retry_after"]

_DELAY_SECONDS = re.compile(r"[0-9]+", re.ASCII)


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a message is retried.

    Attributes:
        schedule: The delay before each attempt, the first included; its length is the
            number of attempts.
        jitter: Fraction in ``[0, 1)`` by which each delay is spread either way.
        retry_after_max: The longest receiver ``Retry-After`` honoured.
    """

    schedule: tuple[timedelta, ...]
    jitter: float = 0.1
    retry_after_max: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        """Refuse a policy that cannot work.

        Raises:
            ValueError: An empty schedule, a negative delay or a jitter outside ``[0, 1)``.
        """
        if not self.schedule:
            raise ValueError("a retry schedule needs at least one attempt")
        if any(delay < timedelta(0) for delay in self.schedule):
            raise ValueError("retry delays cannot be negative")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        if self.retry_after_max < timedelta(0):
            raise ValueError("retry_after_max cannot be negative")

    @property
    def max_attempts(self) -> int:
        """How many attempts a message gets before it is exhausted."""
        return len(self.schedule)


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """Read a ``Retry-After`` value (RFC 9110 §10.2.3).

    Args:
        value: Delay-seconds or an HTTP-date; None when the header was absent.
        now: The current time, to turn a date into a delay.

    Returns:
        The delay (zero for a date in the past), or None when absent or unreadable.
    """
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):  # ASCII digits only: str.isdigit() also accepts "²", "٣"...
        seconds = int(text) if len(text) <= 12 else 10**9  # a huge number is as good as the cap
        return timedelta(seconds=min(seconds, 10**9))
    try:
        when = parsedate_to_datetime(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(when - now, timedelta(0))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def next_attempt_at(
    attempts_made: int,
    now: datetime,
    policy: RetryPolicy,
    *,
    retry_after: timedelta | None = None,
    rand: Callable[[], float] = random.random,
) -> datetime | None:
    """When to try again after a failed attempt, or None when the message is exhausted.

    Args:
        attempts_made: Attempts sent so far, the failed one included (1 after the first).
        now: When the failed attempt ended.
        policy: The schedule, jitter and Retry-After cap.
        retry_after: The receiver's ``Retry-After`` delay, if it sent one.
        rand: A source of floats in ``[0, 1)``; injected by tests.

    Returns:
        ``now`` plus the jittered scheduled delay (or the capped Retry-After when
        longer); None after the last scheduled attempt.
    """
    if attempts_made < 1:
        raise ValueError("attempts_made counts the failed attempt, so it is at least 1")
    if attempts_made >= policy.max_attempts:
        return None
    scheduled = policy.schedule[attempts_made]
    delay = scheduled * (1 + policy.jitter * (2 * rand() - 1))
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.retry_after_max))
    return now + delay
