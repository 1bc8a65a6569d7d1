"""The events the webhooks library writes itself (delivery.exhausted, endpoint.disabled)
carry exactly their documented payload, with a sequence that grows per object."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import (
    DeliveryPolicy,
    RetryPolicy,
    create_endpoint,
    deliver,
    enqueue_event,
    list_messages,
    payload_for,
)
from webhooks_receiver import Receiver, Reply


async def _endpoint(runtime: Runtime, actor: Actor, kek: Kek, url: str, types: tuple[str, ...]) -> str:
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=url, kek=kek, now=runtime.clock(), event_types=types,
                                        allow_insecure=True)
    return created.endpoint.id


async def _data_of(runtime: Runtime, tenant_id: str, endpoint_id: str) -> list[tuple[str, dict[str, Any]]]:
    async with runtime.pool.acquire() as conn:
        found = await list_messages(conn, tenant_id, endpoint_id=endpoint_id)
    return [(m.event_type, msgspec.json.decode(m.body)["data"]) for m in reversed(found)]


async def test_exhausted_and_disabled_payloads_are_the_documented_ones(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/broken", Reply(status=500))
    receiver.script("/gone", Reply(status=410))
    receiver.script("/ops", Reply(status=204))
    broken = await _endpoint(runtime, actor, kek, receiver.url("/broken"), ("operation.confirmed",))
    gone = await _endpoint(runtime, actor, kek, receiver.url("/gone"), ("operation.confirmed",))
    ops = await _endpoint(runtime, actor, kek, receiver.url("/ops"), ("delivery.exhausted", "endpoint.disabled"))
    async with runtime.pool.acquire() as conn, conn.transaction():
        ids = await enqueue_event(conn, actor.tenant_id, "operation.confirmed", {"operation_id": "op_1"},
                                  runtime.clock())
    by_endpoint = dict(zip([broken, gone], ids, strict=True))
    one_try = DeliveryPolicy(retry=RetryPolicy(schedule=(timedelta(0),), jitter=0.0,
                                               retry_after_max=timedelta(minutes=1)),
                             timeout=timedelta(seconds=1), lease=timedelta(seconds=30),
                             disable_after=timedelta(hours=1))
    report = await deliver(runtime.pool, by_endpoint[broken], **{**deps, "policy": one_try})
    assert report is not None and report.state == "exhausted"
    report = await deliver(runtime.pool, by_endpoint[gone], **deps)
    assert report is not None and report.endpoint_disabled

    events = await _data_of(runtime, actor.tenant_id, ops)
    assert [t for t, _ in events] == ["delivery.exhausted", "endpoint.disabled"]
    for event_type, data in events:
        assert payload_for(event_type, data) == data
    exhausted, disabled = events[0][1], events[1][1]
    assert exhausted == {**exhausted, "message_id": by_endpoint[broken], "endpoint_id": broken,
                         "event_type": "operation.confirmed", "attempts": 1}
    assert disabled == {**disabled, "endpoint_id": gone, "reason": "gone", "url": receiver.url("/gone")}
    assert disabled["failing_since"].endswith("Z") and disabled["sequence"] > exhausted["sequence"]
