"""The conversation relay's webhook messages (purpose ``relay``, ADR 0006 addendum): only
``conversation.relay`` has that purpose, it is never subscribed to, and the database refuses
any other purpose."""

from __future__ import annotations

import asyncpg
import msgspec
import pytest
from frontdoor_core.errors import Invalid
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import create_endpoint, enqueue_event, enqueue_message, get_message
from frontdoor_webhooks.event_types import RELAY, validate_event_types


async def test_only_a_relay_has_the_purpose_relay_and_nobody_subscribes_to_it(runtime: Runtime, actor: Actor,
                                                                              kek: Kek) -> None:
    async with runtime.pool.acquire() as conn, conn.transaction():
        created = await create_endpoint(conn, actor, url="https://relay.example.com/pap", kek=kek,
                                        now=runtime.clock(), event_types=["conversation.message.created"],
                                        allow_insecure=True)
        endpoint = created.endpoint.id
        relay = await enqueue_message(conn, actor.tenant_id, endpoint, RELAY, {"conversation_id": "cnv_1"},
                                      purpose="relay", now=runtime.clock())
        message = await get_message(conn, actor.tenant_id, relay)
        assert (message.purpose, message.event_type, message.state) == ("relay", "conversation.relay", "pending")
        assert msgspec.json.decode(message.body)["data"] == {"conversation_id": "cnv_1"}
        for event_type, purpose in ((RELAY, "event"), ("conversation.message.created", "relay"),
                                    ("operation.perform", "relay")):
            with pytest.raises(Invalid) as refused:
                await enqueue_message(conn, actor.tenant_id, endpoint, event_type, {}, purpose=purpose,  # type: ignore[arg-type]
                                      now=runtime.clock())
            assert refused.value.code == "invalid_purpose"
        with pytest.raises(Invalid):
            await enqueue_event(conn, actor.tenant_id, RELAY, {}, runtime.clock())
        with pytest.raises(Invalid):
            validate_event_types([RELAY])
        with pytest.raises(asyncpg.CheckViolationError):
            async with conn.transaction():
                await conn.execute("UPDATE webhook_messages SET purpose = 'other' WHERE tenant_id = $1 AND id = $2",
                                   actor.tenant_id, relay)
