"""`tests.support.fixed_windows`: how long a test waits so its counted requests fall in one window."""

from __future__ import annotations

import pytest
from frontdoor_core.rate_limit import window_key

from tests.support.fixed_windows import wait_for_room

HOUR = 1_800_000_000 - 1_800_000_000 % 3600  # an instant that starts an hour (and its minutes, quarters)


def test_enough_left_waits_not() -> None:
    assert wait_for_room(60, needed_s=15, now=HOUR + 45) == 0
    assert wait_for_room(900, needed_s=20, now=HOUR + 880) == 0


def test_too_little_left_waits_just_past_the_next_window_start() -> None:
    now = HOUR + 50
    wait = wait_for_room(60, needed_s=15, now=now)
    assert 10 < wait < 10.5
    # the limiter's own key: a count after the wait is in the next window, with all of it left
    before, _ = window_key("k", 60, now=now)
    after, left = window_key("k", 60, now=now + wait)
    assert after != before and left == 60


def test_every_window_named_gets_room() -> None:
    # 10 s before the hour: the minute, the quarter and the hour all end; one wait starts them all
    wait = wait_for_room(60, 900, 3600, needed_s=20, now=HOUR + 3590)
    assert 10 < wait < 10.5
    # 50 s into a minute that is not near the hour's end: only the minute is short
    assert 10 < wait_for_room(60, 3600, needed_s=15, now=HOUR + 110) < 10.5


def test_a_need_longer_than_a_window_is_refused() -> None:
    with pytest.raises(ValueError):
        wait_for_room(60, needed_s=60, now=HOUR)
    with pytest.raises(ValueError):
        wait_for_room(needed_s=1, now=HOUR)
