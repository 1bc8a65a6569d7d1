"""Performing a confirmed operation: one attempt at its perform webhook, and what the answer means.

The company answers the perform webhook with one of:

- ``2xx`` and ``{"outcome": "succeeded" | "failed", "result": {"summary", "data"?}}``: the
  outcome is known; the operation becomes final (OPS-6-05 for what ``failed`` must say).
- ``202``: it accepted the work and reports the outcome later through the ledger API (its
  body is not read unless it is a JSON object with an ``outcome``).
- anything else (a timeout, a connection error, ``5xx``, a ``2xx`` that cannot be read as an
  outcome): the outcome is unknown. The operation stays ``in_progress`` and the same message
  (same ``webhook-id``, same idempotency key) is retried on the schedule; exhausted retries
  flag it for the admins and never make it ``failed`` (OPS-6-03).

A ``2xx`` that cannot be read as an outcome is not silently taken as delivered: the attempt
is recorded as ``invalid_response`` and retried, and the operation is flagged at once with
why (`ANSWER_PROBLEMS`: a body cut at the size cap, not JSON, an ``outcome`` that breaks the
rules, no ``outcome`` at all), as it is when its endpoint is gone or the message aborted.

Used by the ledger's fast path and by the dispatcher's retries alike: both call
:func:`perform_message`, and the delivery engine's claim lets one of them send. The answer's
consequence (the outcome, or a flag) is written in the transaction that settles the attempt,
so an answer is never settled without it: if recording it fails, nothing of the attempt is
written and the message is sent again once the claim's lease ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.clock import Clock
from frontdoor_core.errors import Conflict, NotFound
from frontdoor_core.logging import get_logger
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import ClaimedMessage, DeliveryReport, SecretSource, Throttle, deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.sender import RESPONSE_LIMIT, Sender, SenderResponse

from . import ledger
from .rules import validate_result
from .settled import publish_settled

__all__ = ["ANSWER_PROBLEMS", "PerformAnswer", "interpret_answer", "perform_accepts", "perform_message"]

_log = get_logger("frontdoor.operations")

ANSWER_PROBLEMS: Final = frozenset({"answer_truncated", "answer_not_json", "answer_invalid_outcome",
                                    "answer_without_outcome"})
"""Why a ``2xx`` answer could not be read as an outcome; each is also the operation's ``attention``.

- ``answer_truncated``: the body was longer than the size cap (64 KiB) and was cut, or came
  with a content coding and was dropped: it cannot be read whole.
- ``answer_not_json``: a ``2xx`` other than ``202`` whose body is not JSON (truncated JSON
  included).
- ``answer_invalid_outcome``: a JSON ``outcome`` that breaks the rules (not ``succeeded`` or
  ``failed``, a ``result`` that is not an object with a summary, wrong types; OPS-6-05).
- ``answer_without_outcome``: a ``2xx`` other than ``202`` with no ``outcome`` (an empty
  body, or JSON without one).
"""


class PerformAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """What a perform answer means: ``outcome`` (with its result), ``accepted`` or ``unknown``.

    Attributes:
        problem: For an ``unknown`` ``2xx``, why it could not be read (`ANSWER_PROBLEMS`);
            None otherwise (no answer, or not a ``2xx``).
    """

    kind: Literal["outcome", "accepted", "unknown"]
    outcome: Literal["succeeded", "failed"] | None = None
    result: dict[str, Any] | None = None
    problem: str | None = None


_NOT_JSON: Final = object()


def interpret_answer(status: int | None, body: bytes, *, truncated: bool = False) -> PerformAnswer:
    """Classify the company's answer to a perform webhook (pure).

    Args:
        status: The HTTP status; None when no answer came.
        body: The answer's body as received (at most the size cap).
        truncated: The body was cut at the size cap (or dropped): it is never read, since
            what was cut might have changed its meaning.
    """
    if status is None or not 200 <= status < 300:
        return PerformAnswer(kind="unknown")
    if truncated or len(body) > RESPONSE_LIMIT:
        return PerformAnswer(kind="unknown", problem="answer_truncated")
    parsed: Any = None
    if body.strip():
        try:
            parsed = msgspec.json.decode(body)
        except msgspec.DecodeError:
            parsed = _NOT_JSON
    if isinstance(parsed, dict) and "outcome" in parsed:
        try:
            outcome, result = validate_result(parsed.get("outcome"), parsed.get("result"))
        except ValueError:
            return PerformAnswer(kind="unknown", problem="answer_invalid_outcome")
        return PerformAnswer(kind="outcome", outcome=outcome, result=result)
    if status == 202:
        return PerformAnswer(kind="accepted")
    if parsed is _NOT_JSON:
        return PerformAnswer(kind="unknown", problem="answer_not_json")
    return PerformAnswer(kind="unknown", problem="answer_without_outcome")


def _answer_of(response: SenderResponse | None) -> PerformAnswer:
    if response is None:
        return PerformAnswer(kind="unknown")
    return interpret_answer(response.status, response.body, truncated=response.truncated)


def perform_accepts(response: SenderResponse) -> bool:
    """The delivery engine's success test for perform messages: a known outcome or a ``202``."""
    return _answer_of(response).kind != "unknown"


async def perform_message(pool: asyncpg.Pool, redis: aioredis.Redis | None, message_id: str, *, sender: Sender, kek: Kek,
                          clock: Clock, policy: DeliveryPolicy, tenant_id: str | None = None,
                          on_settled: Callable[[str], Awaitable[None]] | None = None,
                          throttle: Throttle | None = None,
                          settled: list[ledger.Operation] | None = None,
                          claimed: ClaimedMessage | None = None,
                          secrets: SecretSource | None = None,
                          claimed_secrets: list[tuple[str, bytes]] | None = None) -> DeliveryReport | None:
    """One attempt at a perform message if it is claimable now, and its consequence in the ledger.

    Returns the attempt's report, or ``None`` when another process holds the message (or it
    is not due). A known outcome is recorded (``in_progress`` → final) in the transaction
    that settles the attempt, then announced once committed; an answer that leaves the
    outcome unknown with no retry coming, or that cannot be read, flags the operation in
    that same transaction.

    ``settled``, when given, receives the operation as this attempt's outcome left it
    (committed), so a waiting confirm answers it without reading it again.

    ``claimed`` (a message the deliverer already claimed, or the confirm wrote claimed, with
    its secret rows in ``claimed_secrets``) and ``secrets`` (the deliverer's secret cache)
    are handed to `deliver`. ``redis`` may be None: the outcome is then not
    announced on the settled channel (waiters re-read it when their wait ends).

    Raises:
        Exception: Whatever kept the consequence from being written (the database, a bug):
            the attempt is then not settled either, and its message is sent again once the
            claim's lease ends.
    """
    known: list[str] = []
    finished: list[ledger.Operation] = []

    async def consequence(conn: asyncpg.Connection, report: DeliveryReport, response: SenderResponse | None) -> None:
        if report.operation_id is not None:
            op = await _apply_answer(conn, report, _answer_of(response), clock)
            if op is not None:
                known.append(report.operation_id)
                finished.append(op)

    report = await deliver(pool, message_id, sender=sender, kek=kek, clock=clock, policy=policy,
                           tenant_id=tenant_id, accept=perform_accepts, throttle=throttle, on_settle=consequence,
                           claimed=claimed, secrets=secrets, claimed_secrets=claimed_secrets)
    if settled is not None:
        settled.extend(finished)
    for operation_id in known:  # committed: wake whoever waits for the outcome
        if on_settled is not None:
            await on_settled(operation_id)
        if redis is not None:
            await publish_settled(redis, operation_id)
    return report


async def _apply_answer(conn: asyncpg.Connection, report: DeliveryReport, answer: PerformAnswer,
                        clock: Clock) -> ledger.Operation | None:
    """Write what an attempt's answer means for its operation; the operation when it now has its outcome."""
    assert report.operation_id is not None
    if answer.kind == "outcome":
        # A real answer: recorded even when a newer claim took the message meanwhile.
        try:
            # A recorded attempt updated its message in this transaction: its row lock is held.
            op, changed = await ledger.record_outcome(conn, report.tenant_id, report.operation_id,
                                                      outcome=answer.outcome, result=answer.result, now=clock(),
                                                      held_message=report.message_id if report.recorded else None)
        except (Conflict, NotFound) as exc:
            # The company already reported a different outcome through the API: the first stands.
            _log.warning("operation_outcome_conflict", operation_id=report.operation_id, code=exc.code)
            return None
        return op if changed else None
    if not report.recorded:
        return None  # the newer claim's attempt says what happens next
    reason = ("endpoint_disabled" if report.endpoint_disabled
              else "delivery_exhausted" if report.state == "exhausted"
              else "delivery_aborted" if report.state == "aborted"
              else answer.problem)
    if reason is not None:
        # No further attempt will come on its own, or the answer cannot be read: the admins
        # must look (never `failed` on a guess, OPS-6-03).
        await ledger.flag_attention(conn, report.tenant_id, report.operation_id, reason, now=clock())
        _log.warning("operation_outcome_unknown", operation_id=report.operation_id, reason=reason)
    elif answer.kind == "accepted":
        # The company now answered as it should: an earlier unreadable answer no longer matters.
        await ledger.clear_attention(conn, report.tenant_id, report.operation_id, ANSWER_PROBLEMS, now=clock())
    return None
