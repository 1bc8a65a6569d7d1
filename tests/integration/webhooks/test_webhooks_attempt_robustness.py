"""Every claimed attempt is settled and bounded by the configured timeout: a slow-but-in-time
receiver, an odd Retry-After, an unreadable answer, a secret that does not open, a sender's
bug; and a throttled backlog is spread out instead of all coming back the next second."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek
from frontdoor_tenancy.credentials.key_encryption import generate_kek_value
from frontdoor_webhooks import DeliveryPolicy, RetryPolicy, SafeSender, create_endpoint, deliver
from frontdoor_webhooks.messages import enqueue_message, get_message
from frontdoor_webhooks.sender import SenderResponse
from webhooks_receiver import Receiver, Reply


async def _endpoint(runtime: Runtime, actor: Actor, kek: Kek, url: str, **kw: Any) -> tuple[str, str]:
    async with runtime.pool.acquire() as conn:
        created = await create_endpoint(conn, actor, url=url, kek=kek, now=runtime.clock(), allow_insecure=True, **kw)
    return created.endpoint.id, created.secret


async def _message(runtime: Runtime, actor: Actor, endpoint_id: str) -> str:
    async with runtime.pool.acquire() as conn:
        return await enqueue_message(conn, actor.tenant_id, endpoint_id, "operation.confirmed", {"n": 1},
                                     purpose="event", now=runtime.clock())


async def _attempt_rows(runtime: Runtime, tenant_id: str, message_id: str) -> list[Any]:
    async with runtime.pool.acquire() as conn:
        return await conn.fetch("SELECT attempt, error_class, response_excerpt, response_status FROM webhook_attempts"
                                " WHERE tenant_id = $1 AND message_id = $2 ORDER BY attempt", tenant_id, message_id)


async def test_the_delivery_timeout_governs_the_request_not_the_fetchers_default(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/slow", Reply(status=204, body=b"", delay=1.5))
    endpoint_id, _ = await _endpoint(runtime, actor, kek, receiver.url("/slow"))
    message_id = await _message(runtime, actor, endpoint_id)
    # The fetcher's own default total is shorter than the receiver takes; the attempt's is not.
    short_default = SafeSender(SafeFetcher(OutboundPolicy(allow_http_loopback=True, total_timeout=0.5,
                                                          connect_timeout=0.5)))
    policy = DeliveryPolicy(retry=deps["policy"].retry, timeout=timedelta(seconds=3), lease=timedelta(seconds=30))

    report = await deliver(runtime.pool, message_id, **{**deps, "sender": short_default, "policy": policy})

    assert report is not None and report.state == "delivered" and report.status == 204, report


def test_the_workers_fetcher_uses_the_webhook_timeout(settings: Settings) -> None:
    from frontdoor_dispatcher.worker_runtime import delivery_outbound_policy

    policy = delivery_outbound_policy(settings)
    assert policy.total_timeout == settings.webhook_timeout.total_seconds() == 15.0
    assert policy.connect_timeout <= policy.total_timeout


async def test_a_non_ascii_retry_after_still_records_the_attempt(
        runtime: Runtime, actor: Actor, kek: Kek, receiver: Receiver, deps: dict[str, Any]) -> None:
    receiver.script("/sup", Reply(status=503, headers=(("Retry-After", "²"), ("Content-Type", "text/plain"))))
    endpoint_id, _ = await _endpoint(runtime, actor, kek, receiver.url("/sup"))
    message_id = await _message(runtime, actor, endpoint_id)

    report = await deliver(runtime.pool, message_id, **deps)

    assert report is not None and report.state == "pending" and report.error_class == "http_5xx"
    assert [(r["attempt"], r["response_status"]) for r in await _attempt_rows(runtime, actor.tenant_id, message_id)
            ] == [(1, 503)]


class _ExplodingHeaders(Mapping[str, str]):
    def __getitem__(self, key: str) -> str:
        raise RuntimeError("unreadable")

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("unreadable")

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0


class _OddAnswer:
    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SenderResponse:
        return SenderResponse(status=503, headers=_ExplodingHeaders(), body=b"")


class _Buggy:
    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SenderResponse:
        raise RuntimeError(f"boom with {headers.get('webhook-signature')}")


async def test_an_answer_that_cannot_be_read_is_still_a_recorded_attempt(
        runtime: Runtime, actor: Actor, kek: Kek, deps: dict[str, Any]) -> None:
    endpoint_id, _ = await _endpoint(runtime, actor, kek, "http://127.0.0.1:9/odd")
    message_id = await _message(runtime, actor, endpoint_id)

    report = await deliver(runtime.pool, message_id, **{**deps, "sender": _OddAnswer()})

    assert report is not None and report.state == "pending" and report.recorded
    assert [r["attempt"] for r in await _attempt_rows(runtime, actor.tenant_id, message_id)] == [1]


async def test_internal_failures_after_the_claim_are_settled_without_leaking_secrets(
        runtime: Runtime, actor: Actor, kek: Kek, deps: dict[str, Any]) -> None:
    endpoint_id, secret = await _endpoint(runtime, actor, kek, "http://127.0.0.1:9/internal")
    unopenable = await _message(runtime, actor, endpoint_id)
    buggy = await _message(runtime, actor, endpoint_id)
    wrong_kek = Kek.from_env_value(generate_kek_value())

    first = await deliver(runtime.pool, unopenable, **{**deps, "kek": wrong_kek})  # DecryptionError
    second = await deliver(runtime.pool, buggy, **{**deps, "sender": _Buggy()})  # not a SendError

    for report, message_id in ((first, unopenable), (second, buggy)):
        assert report is not None and report.error_class == "internal" and report.state == "pending", report
        [row] = await _attempt_rows(runtime, actor.tenant_id, message_id)
        assert row["error_class"] == "internal" and row["attempt"] == 1
        assert "boom" not in row["response_excerpt"] and "v1," not in row["response_excerpt"]
        assert secret.removeprefix("whsec_")[:10] not in row["response_excerpt"]
    # The schedule and exhaustion apply: the last attempt exhausts the message.
    last = DeliveryPolicy(retry=RetryPolicy(schedule=(timedelta(0),)), timeout=timedelta(seconds=1),
                          lease=timedelta(seconds=30))
    runtime.clock.advance(hours=1)  # type: ignore[attr-defined]
    third = await deliver(runtime.pool, buggy, **{**deps, "sender": _Buggy(), "policy": last})
    assert third is not None and third.state == "exhausted" and third.attempt == 2
    async with runtime.pool.acquire() as conn:
        assert (await get_message(conn, actor.tenant_id, buggy)).state == "exhausted"


class _AlwaysOver:
    async def wait(self, endpoint_id: str, per_second: int) -> float:
        return 1.0


async def test_a_throttled_backlog_is_spread_over_the_time_it_needs(
        runtime: Runtime, actor: Actor, kek: Kek, deps: dict[str, Any]) -> None:
    endpoint_id, _ = await _endpoint(runtime, actor, kek, "http://127.0.0.1:9/rated", rate_limit_per_second=2)
    ids = [await _message(runtime, actor, endpoint_id) for _ in range(40)]
    now = runtime.clock()

    for message_id in ids:
        assert await deliver(runtime.pool, message_id, throttle=_AlwaysOver(), **deps) is None

    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT attempts, next_attempt_at FROM webhook_messages WHERE id = ANY($1)", ids)
    assert all(r["attempts"] == 0 for r in rows)
    delays = sorted((r["next_attempt_at"] - now).total_seconds() for r in rows)
    assert delays[0] >= 1.0
    # 40 due at 2/s drain in ~20 s: the deferrals spread over that, not all at now + 1 s.
    assert delays[-1] - delays[0] > 5.0
    assert sum(1 for d in delays if d < 2.5) < 20
