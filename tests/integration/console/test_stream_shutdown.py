"""A deploy is not held by the inbox's open event streams (#16): the console under granian, as its
image runs it, with a dashboard stream open (its lifetime 5 minutes) is sent SIGTERM; the stream
ends at once with ``: restarting`` (the browser's EventSource reconnects to another process) and
the process exits cleanly, long before the stream's lifetime or a grace period would end."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from litestar.testing import AsyncTestClient

from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import sign_in
from tests.support.dns_server import LocalDNS
from tests.support.granian_app import GranianApp, service_env
from tests.support.servers import Servers

GENEROUS = 30.0  # seconds: the stream alone would hold the process for 300


async def test_sigterm_ends_an_open_inbox_stream_and_the_console_stops(
        console: AsyncTestClient[Any], tenant: TenantHandle, servers: Servers, dns: LocalDNS, kek_value: str) -> None:
    await sign_in(console, tenant.email)  # a dashboard session, valid on every console process
    cookie = console.cookies.get("fd_session")
    console.cookies.clear()
    assert cookie
    app = GranianApp("frontdoor_console.asgi:app", service_env(servers, dns, kek_value))
    try:
        await app.ready()
        frames: list[bytes] = []
        opened = asyncio.Event()

        async def watch() -> None:
            async with httpx.AsyncClient(base_url=app.base, timeout=httpx.Timeout(10, read=None)) as http, \
                    http.stream("GET", "/conversations/stream", cookies={"fd_session": cookie}) as r:
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                async for chunk in r.aiter_bytes():
                    frames.append(chunk)
                    opened.set()

        reader = asyncio.create_task(watch())
        async with asyncio.timeout(GENEROUS):
            await opened.wait()
        assert b"retry: 3000" in b"".join(frames)
        started = time.monotonic()
        app.terminate()
        async with asyncio.timeout(GENEROUS):
            await reader  # the stream ended: the server closed it
        assert b"".join(frames).endswith(b": restarting\n\n"), frames
        code = await asyncio.to_thread(app.proc.wait, GENEROUS)
        assert code == 0, app.output()
        assert time.monotonic() - started < GENEROUS
        assert "shutdown_notice.received" in app.output()
    finally:
        app.close()
