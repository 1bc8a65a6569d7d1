"""Inspect an operation and redeliver its perform webhook, in a real browser.

Add a webhook endpoint and an operation kind through the pages; an agent's operation is
proposed and confirmed (directly in the ledger, as the ledger service would); the perform
webhook reaches a local receiver that fails the first time, so the operation stays in
progress and is flagged; the admin finds it highlighted, opens it, sees the failed
attempt, redelivers, and watches the second attempt and the outcome arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from frontdoor_core.ids import new_id
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_operations import ledger
from frontdoor_operations.perform import perform_message
from frontdoor_operations.rules import CallerView
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy, SafeSender
from playwright.async_api import expect

from tests.browser.test_browser_journeys import _sign_in, _sign_up, _tenant_id
from tests.conftest import unique

pytestmark = pytest.mark.browser


class FlakyReceiver:
    """A perform webhook on loopback: 503 the first time, then the outcome."""

    def __init__(self) -> None:
        self.calls = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FlakyReceiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            self.calls += 1
            if self.calls == 1:
                status, body = "503 Unavailable", b"<h1>down for maintenance</h1>"
            else:
                status, body = "200 OK", b'{"outcome": "succeeded", "result": {"summary": "Order 1042 placed"}}'
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def receiver() -> AsyncIterator[FlakyReceiver]:
    async with FlakyReceiver() as r:
        yield r


async def _perform(runtime: Runtime, message_id: str) -> Any:
    """One attempt, as the dispatcher makes it; a single-attempt schedule, so a failure exhausts it."""
    policy = DeliveryPolicy(retry=RetryPolicy(schedule=(timedelta(0),), jitter=0.0), timeout=timedelta(seconds=3),
                            lease=timedelta(seconds=30))
    sender = SafeSender(SafeFetcher(OutboundPolicy(allow_http_loopback=True, total_timeout=3.0)))
    return await perform_message(runtime.pool, runtime.redis, message_id, sender=sender,
                                 kek=Kek.from_env_value(runtime.settings.kek), clock=runtime.clock, policy=policy)


async def test_inspect_an_operation_and_redeliver_its_webhook(context: Any, db: Any, runtime: Runtime,
                                                              receiver: FlakyReceiver) -> None:
    page = await context.new_page()
    _, email = await _sign_up(page)
    await _sign_in(page, email)
    tenant_id = await _tenant_id(db, email)

    # The endpoint and the kind, through the pages.
    await page.click("nav >> text=Webhooks")
    await page.fill("input[name=url]", f"http://127.0.0.1:{receiver.port}/perform")
    await page.check("input[value='operation.succeeded']")
    await page.click("button:has-text('Add endpoint')")
    await expect(page.locator("#new-secret")).to_contain_text("whsec_")
    kind = unique("order.place-")
    await page.click("nav >> text=Operation kinds")
    await page.fill("input[name=name]", kind)
    await page.fill("input[name=scopes]", "orders:write")
    await page.click("button:has-text('Add kind')")
    await expect(page.locator("p.notice")).to_contain_text("Operation kind saved")

    # An agent proposes, the user confirms; the perform webhook fails and its one attempt is spent.
    owner = CallerView(client_id="https://pocket.example/agent.json", user_id="user-1", session_id=new_id("ses"),
                       account="acct-42")
    async with runtime.pool.acquire() as conn:
        op, _ = await ledger.propose(conn, tenant_id, owner, ledger.Proposal(
            kind=kind, summary="Order 2 x espresso beans for 38.00 EUR", terms={"total": {"amount": "38.00"}}),
            now=runtime.clock())
        op, message_id = await ledger.confirm(conn, tenant_id, op.id, revision=1, approved_by="user", via="agent",
                                              now=runtime.clock())
    assert message_id is not None
    report = await _perform(runtime, message_id)
    assert report is not None and report.state == "exhausted" and receiver.calls == 1

    await page.click("nav >> text=Operations")
    row = page.locator(f"tr[data-operation='{op.id}']")
    await expect(row).to_have_class("stuck")
    await expect(row).to_contain_text("needs attention")
    await row.locator(f"a[href='/operations/{op.id}']").click()
    await expect(page.locator("#op-state")).to_have_text("in progress")
    attempts = page.locator("table.attempts tbody tr[data-attempt]")
    await expect(attempts).to_have_count(1)
    await expect(attempts.first).to_contain_text("HTTP 503")
    await expect(attempts.first).to_contain_text("<h1>down for maintenance</h1>")  # shown as text, not markup

    await page.click("text=Redeliver…")
    await expect(page.locator("h1")).to_have_text("Send the perform webhook again?")
    await page.click("button:has-text('Redeliver')")
    await expect(page.locator("p.notice")).to_contain_text("Perform webhook queued again")
    await expect(page.locator("#message-state")).to_have_text("pending")

    # The dispatcher's next attempt reaches the receiver, which answers now: the page's poll shows it.
    report = await _perform(runtime, message_id)
    assert report is not None and report.state == "delivered" and receiver.calls == 2
    await expect(attempts).to_have_count(2, timeout=8000)
    await expect(attempts.nth(1)).to_contain_text("HTTP 200")
    await expect(page.locator("#op-state")).to_have_text("succeeded")
    await expect(page.locator("#result")).to_contain_text("Order 1042 placed")
    await page.click("nav >> text=Audit log")
    await expect(page.locator("main")).to_contain_text("webhook_message.redelivered")
