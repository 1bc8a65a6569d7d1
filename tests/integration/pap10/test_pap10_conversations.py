"""Hosted conversations (PAP §7) for a PAP 1.0 caller: the ``Poppy-Session`` JWT, with an access
token once signed in, gets the same Session checks as a 0.2 Session Token (ADR 0004 §7, §9).

A conversation belongs to the agent (``client_id``) and ``sub`` that started it; once used
signed in it belongs to the access token's account (PAP-7.2-01): signed out is
``sign_in_required`` (401 with a Bearer challenge under 1.0), another account or another
agent ``404 conversation_not_found``, exactly like an unknown one.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import unique
from tests.integration.conftest import TenantHandle
from tests.integration.ledger.conftest import LEDGER
from tests.integration.ledger.test_ledger_conversations import SupportAgent
from tests.integration.pap10.conftest import SCOPES, new_agent, sign_in
from tests.integration.pap10.conftest import Shop1 as _Shop1
from tests.integration.signin.conftest import configure, resource_credential
from tests.support.clock import ShiftableClock
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import Pap10Agent, Session


class Desk1(_Shop1):
    """A tenant with hosted conversations on, its support agent, and 1.0 agents at the ledger."""

    support: SupportAgent

    def conversations(self, path: str = "") -> str:
        return f"{LEDGER}/{self.tenant.slug}/conversations{path}"

    async def say(self, agent: Pap10Agent, session: Session, path: str = "", text: str = "Hello.", *,
                  signed_in: bool = True) -> httpx.Response:
        body = {"message": {"id": unique("msg_"), "sender": "agent", "text": text}}
        return await self.request(agent, session, "POST", self.conversations(path), body=body, signed_in=signed_in)

    async def events(self, agent: Pap10Agent, session: Session, cid: str, *, signed_in: bool = True
                     ) -> httpx.Response:
        return await self.request(agent, session, "GET", self.conversations(f"/{cid}/events"), signed_in=signed_in)


@pytest.fixture
async def desk(console: Any, issuer: Any, ledger: Any, tenant: TenantHandle, clock: ShiftableClock,
               web: MockWeb) -> Desk1:
    await configure(console, tenant, device={"enabled": True, "scopes": SCOPES}, conversations={"enabled": True})
    credential = await resource_credential(console, tenant)
    hook = f"https://{tenant.slug}.support.example/webhooks/conversations"
    r = await console.post("/api/v1/webhook-endpoints", headers=tenant.auth, json={
        "url": hook, "description": "support agent", "event_types": ["conversation.message.created"]})
    assert r.status_code == 201, r.text
    support = SupportAgent(r.json()["secret"], ledger, tenant.slug, credential)
    web.handle(hook, support)
    desk = Desk1(tenant=tenant, ledger=ledger, console=console, issuer=issuer, receiver=None,  # type: ignore[arg-type]
                 credential=credential, clock=clock)
    desk.support = support
    return desk


async def test_a_signed_out_1_0_caller_talks_and_reads_the_reply(desk: Desk1, web: MockWeb,
                                                                 clock: ShiftableClock) -> None:
    agent, user = new_agent(web, clock), Session(sub=unique("user-"))
    r = await desk.say(agent, user, text="Where is my parcel?", signed_in=False)
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    delivered = desk.support.deliveries[-1]["data"]
    assert (delivered["client_id"], delivered["user_id"], delivered["account"]) == (agent.client_id, user.sub, None)
    assert delivered["session_id"].startswith("ses_")  # Frontdoor's ID of the 1.0 Session
    page = (await desk.events(agent, user, cid, signed_in=False)).json()
    assert [e["message"]["text"] for e in page["events"] if e["type"] == "message"] == ["Where is my parcel?",
                                                                                        "Hello!"]
    # Another agent, or another user of the same agent, cannot read it: the same 404 as an unknown one.
    other = new_agent(web, clock)
    unknown = await desk.events(agent, user, "cnv_unknown_0000", signed_in=False)
    for reader, session in ((other, user), (agent, Session(sub=unique("user-")))):
        theirs = await desk.events(reader, session, cid, signed_in=False)
        assert (theirs.status_code, theirs.json()) == (unknown.status_code, unknown.json()) == (
            404, {"error": "conversation_not_found", "error_description": unknown.json()["error_description"]})


async def test_an_accounts_conversation_refuses_a_signed_out_1_0_caller(desk: Desk1, web: MockWeb, store: Any,
                                                                         clock: ShiftableClock) -> None:
    agent, user = new_agent(web, clock), Session(sub=unique("user-"))
    signed = await sign_in(desk, agent, web, store, "acct_ada")
    assert signed.status_code == 200, signed.text
    r = await desk.say(agent, user, text="Where is my last order?")
    assert r.status_code == 201, r.text
    cid = r.json()["conversation_id"]
    assert desk.support.deliveries[-1]["data"]["account"] == "acct_ada"  # the access token's account
    assert (await desk.events(agent, user, cid)).status_code == 200
    signed_out = await desk.events(agent, user, cid, signed_in=False)  # the same Session JWT, no access token
    assert signed_out.status_code == 401 and signed_out.json()["error"] == "sign_in_required", signed_out.text
    assert signed_out.headers["www-authenticate"].startswith("Bearer")
    refused = await desk.say(agent, user, f"/{cid}/messages", "Still there?", signed_in=False)
    assert refused.status_code == 401 and refused.json()["error"] == "sign_in_required"
    # Signed in to another account: not found, as an unknown conversation.
    assert (await sign_in(desk, agent, web, store, "acct_grace")).status_code == 200
    other = await desk.events(agent, user, cid)
    assert other.status_code == 404 and other.json()["error"] == "conversation_not_found"
