"""Bounded polling for asynchronous outcomes (never a bare sleep)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.05) -> T:
    """Call ``probe`` until it returns without AssertionError, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await probe()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)
