"""What one scan of somebody else's domain may cost: fetches, time, bytes, redirects, and
what one host may receive from all scans together.

The scanner is public, so it is a way for anyone to make Frontdoor send requests. Its
outbound policy is its own (`scanner_policy`): public addresses only, whatever the
operator allowlisted for Frontdoor's other fetches (``FRONTDOOR_OUTBOUND_ALLOWLIST`` is
never inherited; ``FRONTDOOR_SCANNER_ALLOWLIST`` exists for tests), HTTPS only, no
development loopback exception. Every fetch of a scan goes through a `ScanBudget`, which
refuses once the scan has used its fetches or its time, and asks a per-host limiter
(``admit``, Redis-backed at the edge) before each request, so no host gets more than its
share whoever asks for the scans (GUIDE-fetch rules via `frontdoor_core.outbound`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import httpx
from frontdoor_core.outbound import FetchError, FetchErrorCode, FetchResult, OutboundPolicy, user_agent

__all__ = [
    "MAX_FETCHES",
    "MAX_REDIRECTS",
    "SCAN_DEADLINE",
    "SCANNER_USER_AGENT",
    "BudgetSpent",
    "ScanBudget",
    "scanner_policy",
    "scanner_user_agent",
]

MAX_FETCHES: Final = 10
"""Fetches one scan may make (each follows at most `MAX_REDIRECTS` redirects)."""
MAX_REDIRECTS: Final = 3
SCAN_DEADLINE: Final = 20.0
"""Seconds one scan may take, every fetch included; what is left is reported as not checked."""
FETCH_TIMEOUT: Final = 4.0
MAX_BYTES: Final = 100_000
SCANNER_USER_AGENT: Final = "Frontdoor-Scanner/0.1"
"""The product; the console adds where the scanner is described (`scanner_user_agent`)."""

Admit = Callable[[str], Awaitable[bool]]


def scanner_user_agent(*, console_base_url: str, docs_base_url: str = "") -> str:
    """The scanner's ``User-Agent``: the product and a page this deployment serves about it, so
    whoever sees the requests in their logs can find out what sent them: the published
    ``docs/scanner.md`` when ``FRONTDOOR_DOCS_BASE_URL`` is set, else the public scanner page
    itself (``{console}/scan``)."""
    about = f"{docs_base_url}scanner.md" if docs_base_url else f"{console_base_url.rstrip('/')}/scan"
    return user_agent(about, SCANNER_USER_AGENT)


def scanner_policy(allowlist: tuple[str, ...] = (), *, agent: str = SCANNER_USER_AGENT) -> OutboundPolicy:
    """The scanner's outbound policy: public HTTPS only, small and fast (``allowlist``: tests
    only); ``agent`` is its ``User-Agent`` (`scanner_user_agent`)."""
    return OutboundPolicy(allow_http_loopback=False, allowlist=allowlist, max_redirects=MAX_REDIRECTS,
                          max_bytes=MAX_BYTES, total_timeout=FETCH_TIMEOUT, connect_timeout=2.0,
                          user_agent=agent)


class BudgetSpent(Exception):
    """The scan has no fetch or no time left; ``reason`` is ``fetches`` or ``time``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _always(_: str) -> bool:
    return True


class ScanBudget:
    """Counts one scan's fetches against its limits; passes them to the SSRF-safe fetcher.

    It has the fetcher's ``fetch`` signature, so the publish check's helpers use it as is.
    """

    def __init__(self, fetcher: Any, *, admit: Admit | None = None, max_fetches: int = MAX_FETCHES,
                 deadline_s: float = SCAN_DEADLINE, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetcher = fetcher
        self._admit = admit or _always
        self._max = max_fetches
        self._clock = clock
        self._deadline = clock() + deadline_s
        self.fetches = 0

    def check(self) -> None:
        """Raise `BudgetSpent` when no further fetch may start."""
        if self.fetches >= self._max:
            raise BudgetSpent("fetches")
        if self._deadline - self._clock() < 0.25:
            raise BudgetSpent("time")

    async def fetch(self, url: str, *, accept_json: bool = True) -> FetchResult:
        """Fetch ``url`` within what is left of the budget.

        Raises:
            BudgetSpent: Before anything is sent, when the scan is out of fetches or time.
            FetchError: As `SafeFetcher.fetch`; ``target_busy`` when the host's share is used
                up (nothing sent); ``timeout`` when the scan's deadline cuts the fetch short.
        """
        self.check()
        host = (httpx.URL(url).host or "").lower() if url.startswith(("https://", "http://")) else ""
        if host and not await self._admit(host):
            raise FetchError(FetchErrorCode.TARGET_BUSY, "per-host scanner limit reached")
        self.fetches += 1
        left = self._deadline - self._clock()
        try:
            async with asyncio.timeout(left):
                result: FetchResult = await self._fetcher.fetch(url, accept_json=accept_json)
                return result
        except TimeoutError:
            raise FetchError(FetchErrorCode.TIMEOUT, "the scan's deadline passed") from None
