"""A relay whose settle never commits (a recurring error in the settle hook) is not re-sent after
every lease without end: once its claim count passes `MAX_RELAY_CLAIMS`, the next claim settles it
as failed without sending it or running the answer hook, and the conversation is queued for a
person, as for any failed relay. Before: each lease's end claimed and sent it again, forever.

The real deliverer sends the relay (the writer claimed it and died, as in
``test_conversation_relay_recovery``); the settle hook's answer step is forced to raise."""

from __future__ import annotations

from typing import Any

import pytest
from frontdoor_conversations import IncomingMessage, relay_delivery, store
from frontdoor_conversations.relay import RelayTarget
from frontdoor_conversations.relay_delivery import MAX_RELAY_CLAIMS
from frontdoor_conversations.rules import Caller
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import sign_up
from tests.integration.dispatcher.test_deliverer import POLICY, running
from tests.integration.ledger.test_conversation_relay_recovery import (
    CompanyServer,
    _deliverer,
    _events,
    _relay_endpoint,
    _relay_row,
)
from tests.support.clock import ShiftableClock
from tests.support.eventually import eventually


@pytest.mark.parametrize("queueing_fails", [False, True], ids=["answer-fails", "queueing-fails-too"])
async def test_a_relay_whose_settle_always_fails_is_given_up_after_a_bound(
        console: AsyncTestClient[Any], runtime: Runtime, settings: Settings, kek_value: str, clock: ShiftableClock,
        monkeypatch: pytest.MonkeyPatch, queueing_fails: bool) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a recurring bug in the settle hook")

    monkeypatch.setattr(relay_delivery, "_record", broken)
    if queueing_fails:  # even the failure branch cannot commit: the relay is settled alone
        monkeypatch.setattr(relay_delivery.store, "queue_for_person", broken)
    tenant = await sign_up(console)
    async with CompanyServer("") as company:
        endpoint_id, company.secret = await _relay_endpoint(console, tenant.auth, runtime, tenant.id, company.port)
        caller = Caller(client_id="https://agent.example/client", user_id=unique("usr_"), session_id=unique("ses_"))
        async with runtime.pool.acquire() as conn:  # a writer that claimed the relay (attempt 1) and died
            posted = await store.start(conn, tenant.id, caller,
                                       IncomingMessage(id="m-1", sender="agent", text="Where is my order?"),
                                       parent_id=None, now=clock(),
                                       relay=RelayTarget(endpoint_id=endpoint_id, lease=POLICY.lease))
        assert posted.relay is not None and posted.relay.attempt == 1
        cid, relay_id = posted.conversation.id, posted.relay.id
        async with running(_deliverer(runtime, settings, kek_value, clock, tenant.id)):
            for attempt in range(2, MAX_RELAY_CLAIMS + 1):  # each sent, its settle rolled back
                clock.advance(seconds=POLICY.lease.total_seconds() + 1)

                async def sent(attempt: int = attempt) -> None:
                    assert len(company.requests) == attempt - 1
                    row = await _relay_row(runtime, tenant.id, relay_id)
                    assert (row["state"], row["attempts"], row["attempt_rows"]) == ("pending", attempt, [])

                await eventually(sent, timeout=30)
                assert (await _events(runtime, tenant.id, cid))[0] == "working"
            clock.advance(seconds=POLICY.lease.total_seconds() + 1)  # the claim past the bound

            async def given_up() -> None:
                assert (await _relay_row(runtime, tenant.id, relay_id))["state"] == "exhausted"

            await eventually(given_up, timeout=30)
        row = await _relay_row(runtime, tenant.id, relay_id)
        assert (row["state"], row["attempts"], row["locked_until"]) == ("exhausted", MAX_RELAY_CLAIMS + 1, None)
        assert row["attempt_rows"] == [(MAX_RELAY_CLAIMS + 1, None)]  # the give-up: recorded, nothing sent
        assert len(company.requests) == MAX_RELAY_CLAIMS - 1  # attempts 2 to 5 were sent; never again
        async with runtime.pool.acquire() as conn:
            error_class = await conn.fetchval("SELECT error_class FROM webhook_attempts WHERE tenant_id = $1"
                                              " AND message_id = $2", tenant.id, relay_id)
        assert error_class == "internal"
        status, events = await _events(runtime, tenant.id, cid)
        asked = [("state", None, None, "queued")] if not queueing_fails else []
        # a person is asked for, as for any failed relay; nothing of an answer
        assert status == ("queued" if not queueing_fails else "working")
        assert events == [("message", "user", "Where is my order?", None), ("state", None, None, "working"), *asked]
