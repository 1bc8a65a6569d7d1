"""Room left in the fixed windows of the rate limits, for tests that count requests against one.

``frontdoor_core.rate_limit`` (and the device flow's miss counters) count in fixed windows of
wall-clock time that start at multiples of the window since the epoch (``int(t) // window_s``).
A test that makes N requests and expects the (N+1)th to be refused must make them all in one
window: across a boundary the count starts over and the (N+1)th is let through. Such a test
awaits `room_in_window` right before its first counted request, with the windows of the limits
it counts against and a generous bound on how long its counted requests take.

The app's clock in tests (``ShiftableClock``) is real time plus an offset that is reset after
every test, so at a test's start it agrees with the wall clock read here.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["room_in_window", "wait_for_room"]


def wait_for_room(*windows_s: int, needed_s: float, now: float) -> float:
    """Seconds to wait from ``now`` until each of ``windows_s`` has at least ``needed_s`` left (0: none).

    Raises:
        ValueError: no window given, one too short to hold ``needed_s``, or windows that do not
            leave it together (the limiters' windows, 1 s, 60 s, 15 min, an hour, divide each other).
    """
    if not windows_s or needed_s >= min(windows_s):
        raise ValueError(f"{needed_s} s cannot fit in windows of {windows_s} s")
    wait = 0.0
    for _ in range(len(windows_s) + 1):  # the next start of one window may be near another's end
        at = now + wait
        short = [w - at % w for w in windows_s if w - at % w < needed_s]
        if not short:
            return wait
        wait += max(short) + 0.05  # just past the boundary, the window's integer second turned over
    raise ValueError(f"windows of {windows_s} s never leave {needed_s} s together")


async def room_in_window(*windows_s: int, needed_s: float) -> None:
    """Return once each fixed window of ``windows_s`` seconds has at least ``needed_s`` left.

    Waits (at most ``needed_s`` and a little more) for the next window when the current one ends
    too soon: the counted requests that follow then fall in one window of every limit.
    """
    wait = wait_for_room(*windows_s, needed_s=needed_s, now=time.time())
    if wait:
        await asyncio.sleep(wait)
