"""The human handoff inbox in a real browser (#16, PAP §7.9).

The admin turns hosted conversations on in the dashboard's Conversations settings form. An agent
with a real Session (the issuer in-process) talks to the real ledger's hosted
conversation endpoint and asks for a person; the conversation turns up in the admin's
inbox without a reload; the admin assigns it to a colleague, takes it over and answers;
the agent reads ``responder: human``, the name it was given and the reply, and its next
message appears in the open transcript without a reload. Both pages are live over their
Server-Sent Events stream, not the 2 s poll: while the stream is open and nothing changes,
no fragment is fetched. A viewer reads the same conversation and is offered no action.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from frontdoor_core.ids import new_id
from frontdoor_core.settings import Settings
from frontdoor_tenancy.credentials import hash_password
from litestar.testing import AsyncTestClient
from playwright.async_api import expect

from tests.browser.test_browser_journeys import BROWSER_ISSUER, _sign_in, _sign_up, _tenant_id
from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD
from tests.support.agent import TestAgent as Agent  # (not collected as a test class)
from tests.support.mock_web import MockWeb

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
async def live_ledger(browser_settings: Settings, migrated: str, agent_web: MockWeb) -> AsyncIterator[Any]:
    """The real ledger app, in-process over ASGI, on the console's database and Redis."""
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_ledger.app import create_app

    app = create_app(browser_settings, fetcher=SafeFetcher(transport=agent_web))
    async with AsyncTestClient(app, base_url=browser_settings.ledger_base_url) as client:
        yield client


class Caller:
    """The agent's side: DPoP-signed requests to ``{ledger}/{slug}/conversations``."""

    def __init__(self, ledger: AsyncTestClient[Any], base: str, agent: Agent, token: str) -> None:
        self.ledger, self.base, self.agent, self.token = ledger, base, agent, token

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        url = f"{self.base}{path}"
        headers = {"Authorization": f"DPoP {self.token}", "DPoP": self.agent.dpop(method, url, token=self.token)}
        if method == "GET":
            return await self.ledger.get(url, headers=headers)
        return await self.ledger.post(url, content=json.dumps(body or {}).encode(),
                                      headers={**headers, "Content-Type": "application/json"})

    async def say(self, path: str, text: str) -> Any:
        return await self.call("POST", path, {"message": {"id": unique("msg_"), "sender": "agent", "text": text}})


async def _member(db: Any, tenant_id: str, role: str) -> str:
    email = f"{unique(role + '-')}@example.com"
    await db.execute("INSERT INTO admins (tenant_id, id, email, password_hash, role) VALUES ($1, $2, $3, $4, $5)",
                     tenant_id, new_id("adm"), email, hash_password(STRONG_PASSWORD), role)
    return email


async def test_an_agent_asks_for_a_person_and_an_admin_answers(
    context: Any, browser: Any, live_console: str, db: Any, live_issuer: Any, live_ledger: Any,
    agent_web: MockWeb, browser_settings: Settings,
) -> None:
    page = await context.new_page()
    slug, email = await _sign_up(page)
    await _sign_in(page, email)
    tenant_id = await _tenant_id(db, email)
    colleague = await _member(db, tenant_id, "admin")
    viewer = await _member(db, tenant_id, "viewer")
    # The admin turns hosted conversations on in the dashboard's form (webhook events, 7 days kept).
    await page.goto("/settings/conversations")
    await page.check("input[name=enabled]")
    await page.check("input[name=mode][value=webhook]")
    await page.fill("input[name=retention_days]", "7")
    await page.click("button:has-text('Save conversations settings')")
    await expect(page.locator("[role=status]")).to_contain_text("Conversations settings saved")
    stored = await db.fetchval("SELECT settings->'conversations' FROM issuer_settings WHERE tenant_id = $1", tenant_id)
    assert stored == {"enabled": True, "retention_days": 7, "relay_endpoint_id": None}

    # The agent starts a Session at the real issuer and a conversation at the real ledger.
    issuer = f"{BROWSER_ISSUER}/{slug}"
    agent = Agent(host=f"{unique('pocket-')}.example", name="Pocket Assistant").publish(agent_web)
    started = await live_issuer.post(f"/{slug}/oauth/token", data=agent.token_form(issuer, "user-1"),
                                     headers={"DPoP": agent.dpop("POST", f"{issuer}/oauth/token")})
    assert started.status_code == 200, started.text
    me = Caller(live_ledger, f"{browser_settings.ledger_base_url}/{slug}/conversations", agent,
                started.json()["access_token"])

    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))

    def count(suffix: str) -> int:
        return sum(1 for url in fetched if url.split("?")[0].endswith(suffix))

    await page.click("nav >> text=Conversations")
    await expect(page.locator("#conversation-rows")).to_contain_text("No conversations here")
    # The stream is open, and it replaced the poll: over three poll periods without a change,
    # the rows are not fetched (a deliberate observation window, not a wait for something).
    await expect(page.locator("#conversation-rows[data-stream-open]")).to_have_count(1)
    await page.wait_for_timeout(300)  # the refresh the stream's opening asks for
    quiet = count("/conversations/rows")
    await page.wait_for_timeout(6500)
    assert count("/conversations/rows") == quiet, "the inbox polled while its stream was open"
    r = await me.say("", "My parcel never arrived.")
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    handoff = await me.call("POST", f"/{cid}/handoff")
    assert handoff.status_code == 202 and handoff.json()["status"] == "queued"
    # The inbox's list refreshes by itself: the queued conversation arrives without a reload.
    row = page.locator(f"tr[data-conversation='{cid}']")
    await expect(row).to_contain_text("queued", timeout=8000)
    assert count("/conversations/rows") > quiet  # fetched because the stream said so

    await row.locator(f"a[href='/conversations/{cid}']").click()
    await expect(page.locator("#conversation-status")).to_have_text("queued")
    await expect(page.locator("#conversation-live")).to_contain_text("My parcel never arrived.")
    await page.select_option("select[name=admin_id]", label=colleague)
    await page.click("button:has-text('Assign')")
    await expect(page.locator("#conversation-assignee")).to_have_text(colleague)
    await page.click("button:has-text('Take over')")
    await expect(page.locator("#conversation-responder")).to_have_text("a person")
    await page.fill("textarea[name=text]", "Sorry about that: a new parcel leaves today.")
    await page.click("button:has-text('Send reply')")
    await expect(page.locator("#conversation-live")).to_contain_text("a new parcel leaves today")

    # The agent reads who answers now, and the person's reply.
    page_of_events = (await me.call("GET", f"/{cid}/events")).json()
    assert page_of_events["responder"] == "human"
    states = [e for e in page_of_events["events"] if e["type"] == "state" and e.get("responder") == "human"]
    assert states and states[0]["responder_name"] == "Northwind Traders support"
    replies = [e["message"] for e in page_of_events["events"]
               if e["type"] == "message" and e["message"]["role"] == "company"]
    assert [(m["sender"], m["text"]) for m in replies] == [("human", "Sorry about that: a new parcel leaves today.")]
    # The agent answers back; the open transcript shows it without a reload, and without a poll.
    await expect(page.locator("#conversation-live[data-stream-open]")).to_have_count(1)
    await page.wait_for_timeout(300)
    quiet = count("/live")
    await page.wait_for_timeout(4500)
    assert count("/live") == quiet, "the transcript polled while its stream was open"
    r = await me.say(f"/{cid}/messages", "Thank you, that works.")
    assert r.status_code == 202, r.text
    await expect(page.locator("#conversation-live")).to_contain_text("Thank you, that works.", timeout=8000)
    assert count("/live") > quiet

    # A viewer reads the inbox and the transcript and is offered nothing to do.
    viewing = await browser.new_context(base_url=live_console, viewport={"width": 1280, "height": 860})
    try:
        other = await viewing.new_page()
        await other.goto("/login")
        await other.fill("input[name=email]", viewer)
        await other.fill("input[name=password]", STRONG_PASSWORD)
        await other.click("button[type=submit]")
        await expect(other.locator("h1")).to_have_text("Overview")
        await other.goto(f"/conversations/{cid}")
        await expect(other.locator("#conversation-live")).to_contain_text("Thank you, that works.")
        await expect(other.locator("#answer")).to_have_count(0)
        await expect(other.locator("button:has-text('Take over')")).to_have_count(0)
    finally:
        await viewing.close()


async def test_a_refused_stream_falls_back_to_polling(context: Any, live_console: str) -> None:
    """With the member's streams all open elsewhere, the page's stream is 429 and the list polls."""
    page = await context.new_page()
    _, email = await _sign_up(page)
    await _sign_in(page, email)
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in await context.cookies() if c["name"] == "fd_session")
    assert cookie
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=live_console,
                                                                   timeout=httpx.Timeout(10, read=None)))
        for _ in range(4):  # the member's allowance, held by "other tabs"
            r = await stack.enter_async_context(client.stream("GET", "/conversations/stream",
                                                              headers={"Cookie": cookie}))
            assert r.status_code == 200
        refused = await client.get("/conversations/stream", headers={"Cookie": cookie})
        assert refused.status_code == 429
        await page.goto("/conversations")
        await expect(page.locator("#conversation-rows")).to_contain_text("No conversations here")
        rows = page.locator("#conversation-rows")
        await expect(rows).to_have_attribute("hx-trigger", "every 2s")  # back to the poll
        await expect(page.locator("#conversation-rows[data-stream-open]")).to_have_count(0)
        began = sum(1 for url in fetched if "/conversations/rows" in url)
        await page.wait_for_timeout(4500)  # two poll periods
        assert sum(1 for url in fetched if "/conversations/rows" in url) >= began + 2
        await page.close()
