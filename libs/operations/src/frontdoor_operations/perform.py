"""Performing a confirmed operation: one attempt at its perform webhook, and what the answer means.

The company answers the perform webhook with one of:

- ``2xx`` and ``{"outcome": "succeeded" | "failed", "result": {"summary", "data"?}}``: the
  outcome is known; the operation becomes final (OPS-6-05 for what ``failed`` must say).
- ``202``: it accepted the work and reports the outcome later through the ledger API.
- anything else (a timeout, a connection error, ``5xx``, an unparseable ``2xx``): the outcome
  is unknown. The operation stays ``in_progress`` and the same message (same ``webhook-id``,
  same idempotency key) is retried on the schedule; exhausted retries flag it for the
  admins and never make it ``failed`` (OPS-6-03).

Used by the ledger's fast path and by the dispatcher's retries alike: both call
:func:`perform_message`, and the delivery engine's claim lets one of them send.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.clock import Clock
from frontdoor_core.errors import Conflict
from frontdoor_core.logging import get_logger
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import DeliveryReport, Throttle, deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.sender import Sender, SenderResponse

from . import ledger
from .rules import validate_result
from .settled import publish_settled

__all__ = ["PerformAnswer", "interpret_answer", "perform_message", "perform_accepts"]

_log = get_logger("frontdoor.operations")


class PerformAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """What a perform answer means: ``outcome`` (with its result), ``accepted`` or ``unknown``."""

    kind: Literal["outcome", "accepted", "unknown"]
    outcome: Literal["succeeded", "failed"] | None = None
    result: dict[str, Any] | None = None


def interpret_answer(status: int | None, body: Any) -> PerformAnswer:
    """Classify the company's answer to a perform webhook (pure)."""
    if status is None or not 200 <= status < 300:
        return PerformAnswer(kind="unknown")
    if isinstance(body, dict) and "outcome" in body:
        try:
            outcome, result = validate_result(body.get("outcome"), body.get("result"))
        except ValueError:
            return PerformAnswer(kind="unknown")
        return PerformAnswer(kind="outcome", outcome=outcome, result=result)
    if status == 202:
        return PerformAnswer(kind="accepted")
    return PerformAnswer(kind="unknown")


def perform_accepts(response: SenderResponse) -> bool:
    """The delivery engine's success test for perform messages: a known outcome or a ``202``."""
    try:
        body = msgspec.json.decode(response.body) if response.body else None
    except msgspec.DecodeError:
        body = None
    return interpret_answer(response.status, body).kind != "unknown"


async def perform_message(pool: asyncpg.Pool, redis: aioredis.Redis, message_id: str, *, sender: Sender, kek: Kek,
                          clock: Clock, policy: DeliveryPolicy, tenant_id: str | None = None,
                          on_settled: Callable[[str], Awaitable[None]] | None = None,
                          throttle: Throttle | None = None) -> DeliveryReport | None:
    """One attempt at a perform message if it is claimable now, and its consequence in the ledger.

    Returns the attempt's report, or ``None`` when another process holds the message (or it
    is not due). A known outcome is recorded (``in_progress`` → final) and announced.
    """
    report = await deliver(pool, message_id, sender=sender, kek=kek, clock=clock, policy=policy,
                           tenant_id=tenant_id, accept=perform_accepts, throttle=throttle)
    if report is None or report.operation_id is None:
        return report
    answer = interpret_answer(report.status, report.response_json)
    if answer.kind == "outcome":
        try:
            async with pool.acquire() as conn:
                _, changed = await ledger.record_outcome(conn, report.tenant_id, report.operation_id,
                                                         outcome=answer.outcome, result=answer.result, now=clock())
        except Conflict as exc:
            # The company already reported a different outcome through the API: the first stands.
            _log.warning("operation_outcome_conflict", operation_id=report.operation_id, code=exc.code)
            return report
        if changed:
            if on_settled is not None:
                await on_settled(report.operation_id)
            await publish_settled(redis, report.operation_id)
    elif report.state in ("exhausted", "aborted") or report.endpoint_disabled:
        # No further attempt will come on its own: the admins must look (never `failed` on a guess).
        reason = ("endpoint_disabled" if report.endpoint_disabled
                  else "delivery_exhausted" if report.state == "exhausted" else "delivery_aborted")
        async with pool.acquire() as conn:
            await ledger.flag_attention(conn, report.tenant_id, report.operation_id, reason, now=clock())
        _log.warning("operation_outcome_unknown", operation_id=report.operation_id, reason=reason)
    return report
