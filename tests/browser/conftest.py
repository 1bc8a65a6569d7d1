"""The real console app over a real socket, driven by the system's headless Chromium.

The console runs in-process under uvicorn on a free loopback port, in this test session's
event loop, against the worker's PostgreSQL, Redis and local DNS server (dev mode, so
plain http:// on loopback works as it does with ``make run``). Chromium is the Debian
package at /usr/bin/chromium (CI installs it; Playwright's own browsers are never
downloaded). A failing test leaves a screenshot of each open page in ``test-artifacts/``.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from frontdoor_core.settings import Settings, load_settings

from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if report.when == "call":
        item.stash.setdefault(_FAILED, report.failed)  # type: ignore[arg-type]
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def browser_settings(settings: Settings, dns: LocalDNS) -> Settings:
    return load_settings({
        "FRONTDOOR_ENV": "dev",
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "FRONTDOOR_KEK": settings.kek,
        "FRONTDOOR_DNS_NAMESERVERS": f"127.0.0.1:{dns.port}",
        "FRONTDOOR_DNS_TIMEOUT": "1s",
        "FRONTDOOR_ISSUER_BASE_URL": "http://127.0.0.1:8001",
        "FRONTDOOR_SIGNUP_RATE_LIMIT": "100000",
        "FRONTDOOR_LOGIN_RATE_LIMIT": "1000",
    })


@pytest.fixture(scope="session")
async def live_console(browser_settings: Settings, migrated: str) -> AsyncIterator[str]:
    """The console's base URL, served by uvicorn until the session ends."""
    import uvicorn
    from frontdoor_console.app import create_app

    port = _free_port()
    app = create_app(browser_settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    assert server.started, "the console did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)


@pytest.fixture(scope="session")
def agent_web() -> MockWeb:
    """Where the issuer fetches agents' metadata and keys (``TestAgent.publish``)."""
    return MockWeb()


@pytest.fixture(scope="session")
async def live_issuer(browser_settings: Settings, migrated: str, agent_web: MockWeb) -> AsyncIterator[Any]:
    """The real issuer app, in-process over ASGI, on the same database and Redis as the console:
    agents start Sessions here and resource servers introspect their tokens here."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_issuer.app import create_app
    from litestar.testing import AsyncTestClient

    app = create_app(browser_settings, fetcher=SafeFetcher(transport=agent_web))
    async with AsyncTestClient(app, base_url="http://127.0.0.1:8001") as client:
        yield client


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("no system Chromium at /usr/bin/chromium (apt-get install -y chromium; .ci/run does)")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            await b.close()


@pytest.fixture
async def context(browser: Any, live_console: str, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A fresh browser profile per test; on failure, a screenshot of every open page."""
    ctx = await browser.new_context(base_url=live_console, viewport={"width": 1280, "height": 860})
    ctx.set_default_timeout(5000)
    try:
        yield ctx
    finally:
        if request.node.stash.get(_FAILED, False):
            ARTIFACTS.mkdir(exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
            for i, page in enumerate(ctx.pages):
                await page.screenshot(path=str(ARTIFACTS / f"{name}-{i}.png"), full_page=True)
        await ctx.close()
