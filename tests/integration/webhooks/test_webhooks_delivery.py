"""Delivery over real PostgreSQL to a real local HTTP receiver: signing, retries, 410, abort,
Retry-After, timeouts, attempt rows, disabling, concurrency."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
import standardwebhooks
from frontdoor_core.runtime import Runtime
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks import (
    PERFORM,
    WebhookVerificationError,
    create_endpoint,
    deliver,
    enable_endpoint,
    enqueue_event,
    enqueue_message,
    get_endpoint,
    get_message,
    list_attempts,
    list_messages,
    redeliver,
    rotate_secret,
    verify,
)
from webhooks_receiver import Receiver, Reply


async def _endpoint(runtime: Runtime, actor: Actor, kek: Kek, url: str, types: tuple[str, ...] = ("operation.confirmed",)
                    ) -> tuple[str, str]:
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=url, kek=kek, now=runtime.clock(), event_types=types,
                                        allow_insecure=True)
    return created.endpoint.id, created.secret


async def _event(runtime: Runtime, tenant_id: str, event_type: str = "operation.confirmed",
                 data: dict[str, Any] | None = None) -> list[str]:
    async with runtime.pool.acquire() as conn, conn.transaction():
        return await enqueue_event(conn, tenant_id, event_type, data or {"operation_id": "op_1"}, runtime.clock())


async def _message(runtime: Runtime, tenant_id: str, message_id: str) -> Any:
    async with runtime.pool.acquire() as conn:
        return await get_message(conn, tenant_id, message_id)


async def _attempts(runtime: Runtime, tenant_id: str, message_id: str) -> Any:
    async with runtime.pool.acquire() as conn:
        return await list_attempts(conn, tenant_id, message_id)


async def test_signed_delivery_verifies_with_standardwebhooks(runtime: Runtime, actor: Actor, kek: Kek,
                                                              receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/hook", Reply(status=204, body=b""))
    _, secret = await _endpoint(runtime, actor, kek, receiver.url("/hook"))
    [message_id] = await _event(runtime, actor.tenant_id, data={"operation_id": "op_42", "amount": "12.50"})

    report = await deliver(runtime.pool, message_id, **deps)

    assert report is not None and report.state == "delivered" and report.status == 204 and report.attempt == 1
    [request] = receiver.at("/hook")
    payload = standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    assert payload["type"] == "operation.confirmed" and payload["data"] == {"operation_id": "op_42", "amount": "12.50"}
    assert request.headers["webhook-id"] == message_id
    assert request.headers["content-type"] == "application/json"
    message = await _message(runtime, actor.tenant_id, message_id)
    assert request.body == message.body.encode()
    assert message.state == "delivered" and message.delivered_at is not None and message.last_status == 204
    assert message.next_attempt_at is None
    [attempt] = await _attempts(runtime, actor.tenant_id, message_id)
    assert attempt.response_status == 204 and attempt.error_class is None and attempt.attempt == 1
    assert attempt.request_headers["webhook-signature"] == "[redacted]"
    assert attempt.request_headers["webhook-id"] == message_id
    assert secret.removeprefix("whsec_") not in str(attempt)
    # delivered: nothing more to claim
    assert await deliver(runtime.pool, message_id, **deps) is None
    assert len(receiver.at("/hook")) == 1


async def test_5xx_is_retried_on_schedule_with_the_same_webhook_id(runtime: Runtime, actor: Actor, kek: Kek,
                                                                   receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/flaky", Reply(status=503, body=b"down for maintenance"), Reply(status=500), Reply(status=200))
    endpoint_id, secret = await _endpoint(runtime, actor, kek, receiver.url("/flaky"))
    [message_id] = await _event(runtime, actor.tenant_id)

    first = await deliver(runtime.pool, message_id, **deps)
    assert first is not None and first.state == "pending" and first.status == 503 and first.error_class == "http_5xx"
    assert first.next_attempt_at is not None
    assert timedelta(seconds=4) < first.next_attempt_at - runtime.clock() <= timedelta(seconds=5)
    endpoint = await _get_endpoint(runtime, actor.tenant_id, endpoint_id)
    assert endpoint.failing_since is not None and endpoint.enabled
    # not due yet
    assert await deliver(runtime.pool, message_id, **deps) is None

    runtime.clock.advance(seconds=6)  # type: ignore[attr-defined]
    second = await deliver(runtime.pool, message_id, **deps)
    assert second is not None and second.state == "pending" and second.attempt == 2
    assert second.next_attempt_at is not None
    assert second.next_attempt_at - runtime.clock() > timedelta(seconds=55)

    runtime.clock.advance(seconds=61)  # type: ignore[attr-defined]
    third = await deliver(runtime.pool, message_id, **deps)
    assert third is not None and third.state == "delivered" and third.attempt == 3

    requests = receiver.at("/flaky")
    assert [r.headers["webhook-id"] for r in requests] == [message_id] * 3
    assert len({r.headers["webhook-timestamp"] for r in requests}) == 3  # fresh timestamp per attempt
    for r in requests:
        assert r.body == requests[0].body
    standardwebhooks.Webhook(secret).verify(requests[-1].body, requests[-1].headers)
    attempts = await _attempts(runtime, actor.tenant_id, message_id)
    assert [(a.attempt, a.response_status, a.error_class) for a in attempts] == [
        (1, 503, "http_5xx"), (2, 500, "http_5xx"), (3, 200, None)]
    assert attempts[0].response_excerpt == "down for maintenance"
    assert attempts[0].next_attempt_at == first.next_attempt_at and attempts[2].next_attempt_at is None
    assert (await _get_endpoint(runtime, actor.tenant_id, endpoint_id)).failing_since is None


async def _get_endpoint(runtime: Runtime, tenant_id: str, endpoint_id: str) -> Any:
    async with runtime.pool.acquire() as conn:
        return await get_endpoint(conn, tenant_id, endpoint_id)


async def test_exhaustion_after_the_last_attempt_is_reported_to_other_endpoints(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/broken", Reply(status=400, body=b'{"error":"bad"}'))
    receiver.script("/ops", Reply(status=200))
    broken, _ = await _endpoint(runtime, actor, kek, receiver.url("/broken"))
    ops, _ = await _endpoint(runtime, actor, kek, receiver.url("/ops"), ("delivery.exhausted",))
    [message_id] = await _event(runtime, actor.tenant_id)
    reports = []
    for _ in range(4):
        report = await deliver(runtime.pool, message_id, **deps)
        assert report is not None
        reports.append(report)
        runtime.clock.advance(minutes=6)  # type: ignore[attr-defined]
    assert [r.state for r in reports] == ["pending", "pending", "pending", "exhausted"]
    assert reports[-1].next_attempt_at is None and all(r.error_class == "http_4xx" for r in reports)
    assert await deliver(runtime.pool, message_id, **deps) is None
    async with runtime.pool.acquire() as conn:
        [notice] = await list_messages(conn, actor.tenant_id, endpoint_id=ops)
        assert await list_messages(conn, actor.tenant_id, endpoint_id=broken, state="exhausted")
    assert notice.event_type == "delivery.exhausted"
    assert f'"message_id":"{message_id}"' in notice.body and f'"endpoint_id":"{broken}"' in notice.body


async def test_410_disables_the_endpoint_and_tells_the_other_endpoints(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/gone", Reply(status=410))
    receiver.script("/watch", Reply(status=200))
    gone, _ = await _endpoint(runtime, actor, kek, receiver.url("/gone"))
    watcher, _ = await _endpoint(runtime, actor, kek, receiver.url("/watch"), ("endpoint.disabled",))
    first, second = await _event(runtime, actor.tenant_id), await _event(runtime, actor.tenant_id)

    report = await deliver(runtime.pool, first[0], **deps)
    assert report is not None and report.status == 410 and report.endpoint_disabled
    endpoint = await _get_endpoint(runtime, actor.tenant_id, gone)
    assert not endpoint.enabled and endpoint.disabled_reason == "gone"
    # its messages wait: pending, not claimable while disabled
    assert (await _message(runtime, actor.tenant_id, first[0])).state == "pending"
    runtime.clock.advance(minutes=10)  # type: ignore[attr-defined]
    assert await deliver(runtime.pool, second[0], **deps) is None
    assert len(receiver.at("/gone")) == 1

    async with runtime.pool.acquire() as conn:
        [notice] = await list_messages(conn, actor.tenant_id, endpoint_id=watcher)
        entries = await audit.list_entries(conn, actor.tenant_id, action="webhook_endpoint.disabled")
    assert notice.event_type == "endpoint.disabled" and '"reason":"gone"' in notice.body
    assert [(e.actor_type, e.target_id, e.details["reason"]) for e in entries] == [("system", gone, "gone")]

    # re-enabled, the waiting messages go out
    receiver.script("/gone", Reply(status=200))
    async with runtime.pool.acquire() as conn:
        await enable_endpoint(conn, actor, gone, now=runtime.clock())
    for message_id in (first[0], second[0]):
        report = await deliver(runtime.pool, message_id, **deps)
        assert report is not None and report.state == "delivered"


async def test_abort_header_stops_retries_for_that_message_only(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/picky", Reply(status=422, headers=(("webhook-delivery", "abort"),), body=b"no thanks"),
                    Reply(status=200))
    endpoint_id, _ = await _endpoint(runtime, actor, kek, receiver.url("/picky"))
    [aborted] = await _event(runtime, actor.tenant_id)
    report = await deliver(runtime.pool, aborted, **deps)
    assert report is not None and report.state == "aborted" and report.next_attempt_at is None
    runtime.clock.advance(hours=1)  # type: ignore[attr-defined]
    assert await deliver(runtime.pool, aborted, **deps) is None
    assert (await _get_endpoint(runtime, actor.tenant_id, endpoint_id)).enabled
    [other] = await _event(runtime, actor.tenant_id)
    report = await deliver(runtime.pool, other, **deps)
    assert report is not None and report.state == "delivered"
    # a redelivery is explicit and goes out with the same webhook-id
    async with runtime.pool.acquire() as conn:
        await redeliver(conn, actor, aborted, now=runtime.clock())
    report = await deliver(runtime.pool, aborted, **deps)
    assert report is not None and report.state == "delivered" and report.attempt == 1
    assert [r.headers["webhook-id"] for r in receiver.at("/picky")] == [aborted, other, aborted]


async def test_retry_after_is_honoured_and_capped(runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver,
                                                  deps: dict[str, Any]) -> None:
    receiver.script("/busy", Reply(status=429, headers=(("Retry-After", "120"),)),
                    Reply(status=503, headers=(("Retry-After", "86400"),)), Reply(status=200))
    await _endpoint(runtime, actor, kek, receiver.url("/busy"))
    [message_id] = await _event(runtime, actor.tenant_id)
    first = await deliver(runtime.pool, message_id, **deps)
    assert first is not None and first.status == 429 and first.error_class == "http_4xx"
    assert first.next_attempt_at is not None
    assert timedelta(seconds=119) < first.next_attempt_at - runtime.clock() <= timedelta(seconds=120)
    runtime.clock.advance(seconds=60)  # type: ignore[attr-defined]
    assert await deliver(runtime.pool, message_id, **deps) is None  # the schedule said 5 s, the receiver 120
    runtime.clock.advance(seconds=61)  # type: ignore[attr-defined]
    second = await deliver(runtime.pool, message_id, **deps)
    assert second is not None and second.next_attempt_at is not None
    # one day asked, capped at the policy's 10 minutes
    assert timedelta(minutes=9) < second.next_attempt_at - runtime.clock() <= timedelta(minutes=10)


async def test_timeout_and_refused_connections_are_classified(runtime: Runtime, actor: Actor, kek: Kek,
                                                              receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/slow", Reply(status=200, delay=3.0))
    await _endpoint(runtime, actor, kek, receiver.url("/slow"))
    [message_id] = await _event(runtime, actor.tenant_id)
    started = time.monotonic()
    report = await deliver(runtime.pool, message_id, **deps)
    assert time.monotonic() - started < 2.5
    assert report is not None and report.state == "pending" and report.status is None
    assert report.error_class == "timeout"
    [attempt] = await _attempts(runtime, actor.tenant_id, message_id)
    assert attempt.error_class == "timeout" and attempt.response_status is None and attempt.duration_ms >= 900
    assert "timed out" in attempt.response_excerpt or "exceeded" in attempt.response_excerpt


async def test_connect_error_is_classified(runtime: Runtime, other_tenant_id: str, kek: Kek,
                                           deps: dict[str, Any]) -> None:
    actor = Actor(tenant_id=other_tenant_id, type="system")
    async with Receiver() as closed:
        url = closed.url("/hook")
    await _endpoint(runtime, actor, kek, url)
    [message_id] = await _event(runtime, other_tenant_id)
    report = await deliver(runtime.pool, message_id, **deps)
    assert report is not None and report.error_class == "connect" and report.state == "pending"


async def test_an_endpoint_failing_longer_than_disable_after_is_disabled(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/down", Reply(status=502))
    endpoint_id, _ = await _endpoint(runtime, actor, kek, receiver.url("/down"))
    reports = []
    for _ in range(3):  # disable_after is one hour; each message fails once
        [message_id] = await _event(runtime, actor.tenant_id)
        report = await deliver(runtime.pool, message_id, **deps)
        assert report is not None
        reports.append(report.endpoint_disabled)
        runtime.clock.advance(minutes=35)  # type: ignore[attr-defined]
    assert reports == [False, False, True]
    endpoint = await _get_endpoint(runtime, actor.tenant_id, endpoint_id)
    assert not endpoint.enabled and endpoint.disabled_reason == "failing"
    async with runtime.pool.acquire() as conn:
        await enable_endpoint(conn, actor, endpoint_id, now=runtime.clock())
    assert (await _get_endpoint(runtime, actor.tenant_id, endpoint_id)).failing_since is None


async def test_concurrent_deliver_calls_send_once(runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver,
                                                  deps: dict[str, Any]) -> None:
    receiver.script("/once", Reply(status=200, delay=0.2))
    await _endpoint(runtime, actor, kek, receiver.url("/once"))
    [message_id] = await _event(runtime, actor.tenant_id)
    reports = await asyncio.gather(*(deliver(runtime.pool, message_id, **deps) for _ in range(6)))
    assert len(receiver.at("/once")) == 1
    sent = [r for r in reports if r is not None]
    assert len(sent) == 1 and sent[0].state == "delivered"
    assert len(await _attempts(runtime, actor.tenant_id, message_id)) == 1


async def test_perform_webhook_answer_is_parsed(runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver,
                                                deps: dict[str, Any]) -> None:
    receiver.script("/perform", Reply(status=200, body=b'{"outcome":"succeeded","result":{"order":"A-1"}}'))
    endpoint_id, secret = await _endpoint(runtime, actor, kek, receiver.url("/perform"), ())
    async with runtime.pool.acquire() as conn, conn.transaction():
        message_id = await enqueue_message(conn, actor.tenant_id, endpoint_id, PERFORM, {"operation_id": "op_9"},
                                           purpose="perform", operation_id="op_9", now=runtime.clock())
    report = await deliver(runtime.pool, message_id, tenant_id=actor.tenant_id, **deps)
    assert report is not None and report.purpose == "perform" and report.operation_id == "op_9"
    assert report.response_json == {"outcome": "succeeded", "result": {"order": "A-1"}}
    [request] = receiver.at("/perform")
    assert standardwebhooks.Webhook(secret).verify(request.body, request.headers)["type"] == "operation.perform"


async def test_another_tenant_cannot_claim_the_message(runtime: Runtime, actor: Actor, other_tenant_id: str,
                                                       kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/mine", Reply(status=200))
    await _endpoint(runtime, actor, kek, receiver.url("/mine"))
    [message_id] = await _event(runtime, actor.tenant_id)
    assert await deliver(runtime.pool, message_id, tenant_id=other_tenant_id, **deps) is None
    assert receiver.at("/mine") == []
    assert await deliver(runtime.pool, message_id, tenant_id=actor.tenant_id, **deps) is not None


async def test_rotated_secret_signs_beside_the_new_one_during_the_overlap(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/rot", Reply(status=200))
    endpoint_id, old = await _endpoint(runtime, actor, kek, receiver.url("/rot"))
    async with runtime.pool.acquire() as conn, conn.transaction():
        new = await rotate_secret(conn, actor, endpoint_id, kek=kek, now=runtime.clock(), overlap=timedelta(minutes=3))
    assert new != old
    [during] = await _event(runtime, actor.tenant_id)
    await deliver(runtime.pool, during, **deps)
    request = receiver.at("/rot")[-1]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    standardwebhooks.Webhook(old).verify(request.body, request.headers)
    standardwebhooks.Webhook(new).verify(request.body, request.headers)

    runtime.clock.advance(minutes=4)  # type: ignore[attr-defined]
    [after] = await _event(runtime, actor.tenant_id)
    await deliver(runtime.pool, after, **deps)
    request = receiver.at("/rot")[-1]
    assert len(request.headers["webhook-signature"].split(" ")) == 1
    # the old secret no longer verifies (timestamps checked against the moved clock by hand)
    now = int(runtime.clock().timestamp())
    verify(new, request.headers, request.body, now=now)
    with pytest.raises(WebhookVerificationError, match="no matching"):
        verify(old, request.headers, request.body, now=now)
