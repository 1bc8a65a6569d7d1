"""Console apps with the scanner's fetcher pointed at a mock web or at loopback-only sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from frontdoor_core.outbound import SafeFetcher
from frontdoor_core.settings import Settings
from frontdoor_tenancy.scanner import scanner_policy
from litestar.testing import AsyncTestClient

from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb


@pytest.fixture(scope="session")
def scan_web() -> MockWeb:
    """The internet as the scanner sees it (URL, size, type and redirect rules apply; addresses do not)."""
    return MockWeb()


async def scanner_client(settings: Settings, clock: ShiftableClock, scanner_fetcher: Any, publish_web: MockWeb,
                         **overrides: Any) -> AsyncIterator[AsyncTestClient[Any]]:
    from frontdoor_console.app import create_app

    tuned = msgspec.structs.replace(settings, **overrides)
    app = create_app(tuned, clock=clock, fetcher=SafeFetcher(transport=publish_web), scanner_fetcher=scanner_fetcher)
    async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
        yield client


@pytest.fixture(scope="session")
async def scanner(settings: Settings, migrated: str, clock: ShiftableClock, scan_web: MockWeb, web: MockWeb
                  ) -> AsyncIterator[AsyncTestClient[Any]]:
    """The console whose scanner fetches from ``scan_web`` (limits high: tests share one client address)."""
    fetcher = SafeFetcher(scanner_policy(), transport=scan_web)
    async for client in scanner_client(settings, clock, fetcher, web, scanner_rate_limit=100_000,
                                       scanner_target_rate_limit=100_000):
        yield client
