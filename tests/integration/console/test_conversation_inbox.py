"""The dashboard's human handoff inbox at the wire (#16): the queue lists what an agent handed off
(and what the company asked the user for), polled every 2 s; a member takes over (the agent's
``state`` event says ``responder: human`` and names the member's display name, never their email),
replies (``sender: human``, ``sender_name``), hands back, assigns, closes after a confirmation;
each action is audited, refused without CSRF, refused to viewers (who read only), and another
tenant's conversation is 404. A Session's page shows its conversations' transcripts."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from frontdoor_conversations import Caller, ConversationWaiters, parse_message, store
from frontdoor_core.ids import new_id
from frontdoor_core.runtime import Runtime
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.console.test_dashboard import add_admin, sign_in


def caller(account: str | None = None) -> Caller:
    return Caller(client_id=f"https://{unique('agent-')}.example/agent.json", user_id=unique("usr_"),
                  session_id=new_id("ses"), account=account)


async def start(runtime: Runtime, tenant_id: str, who: Caller, text: str = "My order never came.") -> str:
    message = parse_message({"id": unique("m_"), "sender": "human", "text": text})
    async with runtime.pool.acquire() as conn:
        posted = await store.start(conn, tenant_id, who, message, parent_id=None, now=runtime.clock())
    return posted.conversation.id


async def handed_off(runtime: Runtime, tenant_id: str, who: Caller | None = None) -> tuple[str, Caller]:
    who = who or caller()
    conversation_id = await start(runtime, tenant_id, who)
    async with runtime.pool.acquire() as conn:
        await store.handoff(conn, tenant_id, who, conversation_id, now=runtime.clock())
    return conversation_id, who


async def events(runtime: Runtime, tenant_id: str, conversation_id: str) -> list[dict[str, Any]]:
    async with runtime.pool.acquire() as conn:
        conversation = await store.find(conn, tenant_id, conversation_id)
        assert conversation is not None
        return (await store.read_page(conn, conversation, None, limit=200)).events


async def audit_rows(db: Any, tenant_id: str, action: str) -> list[Any]:
    return list(await db.fetch("SELECT actor_id, target_id, details FROM audit_log WHERE tenant_id = $1"
                               " AND action = $2 ORDER BY at", tenant_id, action))


async def test_queue_take_over_reply_hand_back_and_close(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                         other_tenant: TenantHandle, runtime: Runtime,
                                                         db: Any) -> None:
    queued, who = await handed_off(runtime, tenant.id)
    idle = await start(runtime, tenant.id, caller(), "Just browsing.")
    asked = await start(runtime, tenant.id, caller(), "Refund please.")
    async with runtime.pool.acquire() as conn:  # the company's agent needs the user themselves
        await store.company_event(conn, tenant.id, asked, {"type": "user_requested", "reason": "Confirm the refund"},
                                  now=runtime.clock())
    theirs, _ = await handed_off(runtime, other_tenant.id)
    csrf = await sign_in(console, tenant.email)

    page = await console.get("/conversations")
    assert page.status_code == 200
    assert queued in page.text and asked in page.text and idle not in page.text and theirs not in page.text
    assert 'hx-get="/conversations/rows?view=queue"' in page.text and 'hx-trigger="every 2s"' in page.text
    assert 'id="waiting-count">2<' in page.text
    rows = await console.get("/conversations/rows", params={"view": "open"})
    assert idle in rows.text and queued in rows.text and theirs not in rows.text

    # Another tenant's conversation is unknown here, to read and to act on.
    assert (await console.get(f"/conversations/{theirs}")).status_code == 404
    r = await console.post(f"/conversations/{theirs}/take-over", headers={"x-csrftoken": csrf})
    assert r.status_code == 404
    assert (await events(runtime, other_tenant.id, theirs))[-1]["status"] == "queued"

    # Without the CSRF token nothing happens.
    r = await console.post(f"/conversations/{queued}/take-over", follow_redirects=False)
    assert r.status_code == 403
    assert (await events(runtime, tenant.id, queued))[-1]["status"] == "queued"

    r = await console.post("/conversations/display-name", data={"display_name": "Dana at Support",
                                                                "_csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    r = await console.post(f"/conversations/{queued}/take-over", headers={"x-csrftoken": csrf},
                           follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/conversations/{queued}?notice=taken_over"
    state = (await events(runtime, tenant.id, queued))[-1]
    assert state["type"] == "state" and state["responder"] == "human" and state["status"] == "idle"
    assert state["responder_name"] == "Dana at Support"
    async with runtime.pool.acquire() as conn:
        conversation = await store.find(conn, tenant.id, queued)
    assert conversation is not None and conversation.responder == "human"

    detail = await console.get(f"/conversations/{queued}")
    assert "My order never came." in detail.text and 'hx-get="/conversations/' + queued + '/live"' in detail.text
    assert f'action="/conversations/{queued}/reply"' in detail.text
    form_id = re.search(r'name="message_id" value="([^"]+)"', detail.text)
    assert form_id
    for _ in range(2):  # a double submit is one message
        r = await console.post(f"/conversations/{queued}/reply", data={
            "text": "Sorry about that: a new parcel leaves today.", "message_id": form_id.group(1),
            "_csrf_token": csrf}, follow_redirects=False)
        assert r.status_code == 303, r.text
    replies = [e for e in await events(runtime, tenant.id, queued)
               if e["type"] == "message" and e["message"]["role"] == "company"]
    assert len(replies) == 1
    message = replies[0]["message"]
    assert message["sender"] == "human" and message["sender_name"] == "Dana at Support"
    assert message["text"] == "Sorry about that: a new parcel leaves today."
    assert tenant.email not in str(await events(runtime, tenant.id, queued))  # never the admin's email

    live = await console.get(f"/conversations/{queued}/live")
    assert live.status_code == 200 and "a new parcel leaves today" in live.text and "Dana at Support" in live.text

    r = await console.post(f"/conversations/{queued}/reply", data={"text": "  ", "_csrf_token": csrf})
    assert r.status_code == 422 and "1 to 4000 characters" in r.text

    r = await console.post(f"/conversations/{queued}/hand-back", headers={"x-csrftoken": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    last = (await events(runtime, tenant.id, queued))[-1]
    assert last["responder"] == "agent" and "responder_name" not in last
    r = await console.post(f"/conversations/{queued}/reply", data={"text": "One more thing", "_csrf_token": csrf})
    assert r.status_code == 409 and "Take the conversation over" in r.text  # the agent answers again

    confirm = await console.get(f"/conversations/{queued}/close")
    assert confirm.status_code == 200 and f'action="/conversations/{queued}/close"' in confirm.text
    r = await console.post(f"/conversations/{queued}/close", data={"_csrf_token": csrf})
    assert r.status_code == 200 and "Close this conversation?" in r.text  # asks first
    assert (await events(runtime, tenant.id, queued))[-1]["status"] != "closed"
    r = await console.post(f"/conversations/{queued}/close", data={"confirm": "yes", "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert (await events(runtime, tenant.id, queued))[-1]["status"] == "closed"
    assert queued in (await console.get("/conversations", params={"view": "closed"})).text

    admin_id = await db.fetchval("SELECT id FROM admins WHERE tenant_id = $1 AND email = $2", tenant.id, tenant.email)
    for action in ("conversation.taken_over", "conversation.replied", "conversation.handed_back",
                   "conversation.closed"):
        rows_ = await audit_rows(db, tenant.id, action)
        assert [(r["actor_id"], r["target_id"]) for r in rows_] == [(admin_id, queued)], action
    replied = (await audit_rows(db, tenant.id, "conversation.replied"))[0]
    assert "parcel" not in str(replied["details"])  # the audit names the message, never what was written
    assert who.user_id not in str(await audit_rows(db, tenant.id, "conversation.display_name_set"))


async def test_assignment_display_names_and_viewers(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                    other_tenant: TenantHandle, runtime: Runtime, db: Any) -> None:
    queued, _ = await handed_off(runtime, tenant.id)
    colleague = await add_admin(db, tenant, "admin")
    colleague_id = await db.fetchval("SELECT id FROM admins WHERE email = $1", colleague)
    viewer = await add_admin(db, tenant, "viewer")
    viewer_id = await db.fetchval("SELECT id FROM admins WHERE email = $1", viewer)
    stranger_id = await db.fetchval("SELECT id FROM admins WHERE tenant_id = $1", other_tenant.id)
    csrf = await sign_in(console, tenant.email)

    page = await console.get(f"/conversations/{queued}")
    assert colleague in page.text and f'value="{viewer_id}"' not in page.text  # viewers cannot answer
    r = await console.post(f"/conversations/{queued}/assign", data={"admin_id": colleague_id, "_csrf_token": csrf},
                           follow_redirects=False)
    assert r.status_code == 303
    assert colleague in (await console.get("/conversations/rows", params={"view": "queue"})).text
    assert (await audit_rows(db, tenant.id, "conversation.assigned"))[-1]["details"] == {"admin_id": colleague_id}
    r = await console.post(f"/conversations/{queued}/assign", data={"admin_id": viewer_id, "_csrf_token": csrf})
    assert r.status_code == 422
    r = await console.post(f"/conversations/{queued}/assign", data={"admin_id": stranger_id, "_csrf_token": csrf})
    assert r.status_code == 404  # another tenant's member is nobody here

    # The colleague sees it under "assigned to me"; the owner does not.
    assert queued not in (await console.get("/conversations/rows", params={"view": "mine"})).text
    csrf2 = await sign_in(console, colleague)
    assert queued in (await console.get("/conversations/rows", params={"view": "mine"})).text
    # No display name chosen: the company's name, never the email.
    r = await console.post(f"/conversations/{queued}/take-over", headers={"x-csrftoken": csrf2},
                           follow_redirects=False)
    assert r.status_code == 303
    state = (await events(runtime, tenant.id, queued))[-1]
    assert state["responder_name"].endswith(" support") and "@" not in state["responder_name"]
    for bad in ("dana@example.com", "", "x" * 61, "<b>Dana</b>"):
        r = await console.post("/conversations/display-name", data={"display_name": bad, "_csrf_token": csrf2})
        assert r.status_code == 422, bad
    assert await db.fetchval("SELECT count(*) FROM conversation_responder_names WHERE tenant_id = $1"
                             " AND admin_id = $2", tenant.id, colleague_id) == 0

    # A viewer reads the inbox and the transcript, and changes nothing.
    viewer_csrf = await sign_in(console, viewer)
    page = await console.get(f"/conversations/{queued}")
    assert page.status_code == 200 and "My order never came." in page.text
    assert "/take-over" not in page.text and "/reply" not in page.text and "display_name" not in page.text
    before = len(await events(runtime, tenant.id, queued))
    for path, data in [(f"/conversations/{queued}/take-over", {}), (f"/conversations/{queued}/reply",
                                                                    {"text": "hi"}),
                       (f"/conversations/{queued}/hand-back", {}), (f"/conversations/{queued}/close",
                                                                    {"confirm": "yes"}),
                       (f"/conversations/{queued}/assign", {"admin_id": viewer_id}),
                       ("/conversations/display-name", {"display_name": "Viewer"})]:
        r = await console.post(path, data={**data, "_csrf_token": viewer_csrf}, headers={"x-csrftoken": viewer_csrf})
        assert r.status_code == 403, path
    assert len(await events(runtime, tenant.id, queued)) == before
    console.cookies.clear()


async def test_a_take_over_wakes_a_reader_in_another_process(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                             runtime: Runtime) -> None:
    """The console publishes on Redis: a long poll waiting at a ledger process wakes at once."""
    queued, _ = await handed_off(runtime, tenant.id)
    waiters = ConversationWaiters(runtime.redis)
    await waiters.start()
    try:
        csrf = await sign_in(console, tenant.email)
        async def wait() -> float:
            loop = asyncio.get_running_loop()
            began = loop.time()
            with waiters.subscribe(tenant.id, queued) as sub:
                await asyncio.wait_for(sub.changed.wait(), timeout=10)
            return loop.time() - began

        waiting = asyncio.create_task(wait())
        await asyncio.sleep(0.3)
        r = await console.post(f"/conversations/{queued}/take-over", headers={"x-csrftoken": csrf},
                               follow_redirects=False)
        assert r.status_code == 303
        assert await waiting < 5
    finally:
        await waiters.stop()
        console.cookies.clear()


async def test_the_session_page_shows_its_conversations(console: AsyncTestClient[Any], tenant: TenantHandle,
                                                        other_tenant: TenantHandle, runtime: Runtime,
                                                        db: Any) -> None:
    who, quiet = caller(), caller()
    for c in (who, quiet):
        await db.execute("INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
                         " VALUES ($1, $2, $3, $4, $5, $5)", tenant.id, c.session_id, c.client_id, c.user_id,
                         runtime.clock())
    conversation_id = await start(runtime, tenant.id, who, "Where is parcel 42?")
    theirs = await start(runtime, other_tenant.id, who, "Their secret question")
    await sign_in(console, tenant.email)
    page = await console.get(f"/sessions/{who.session_id}")
    assert f'hx-get="/sessions/{who.session_id}/conversations"' in page.text
    fragment = await console.get(f"/sessions/{who.session_id}/conversations")
    assert fragment.status_code == 200
    assert conversation_id in fragment.text and "Where is parcel 42?" in fragment.text
    assert theirs not in fragment.text and "Their secret question" not in fragment.text
    empty = await console.get(f"/sessions/{quiet.session_id}/conversations")
    assert empty.status_code == 200 and "started no hosted conversation" in empty.text
    assert (await console.get(f"/sessions/{new_id('ses')}/conversations")).status_code == 404
    console.cookies.clear()
