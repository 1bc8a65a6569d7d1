"""The delivery engine: claim a due message, sign it, send it, record the attempt, decide what next.

Several processes may try the same message (deliverer replicas, the ledger's fast path
waiting for a perform answer): the claim, one compare-and-set ``UPDATE`` that takes a
lease (`claim` here, or `frontdoor_webhooks.claims.claim_due` for a batch), lets exactly
one of them send. No database connection is held while the
receiver is being waited for. The result is written only if the claim is still current
(a redelivery or an expired lease meanwhile wins), in one transaction with the attempt
row and the endpoint's health, and with whatever the caller's `SettleHook` writes about
the answer (the perform webhook's outcome): the answer and its consequence commit together
or not at all.

`claim` and `due_messages` look messages up by ID across tenants, as a deliverer must;
everything after the lookup filters by the message's tenant.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg
import msgspec
from frontdoor_core.clock import Clock
from frontdoor_core.errors import NotFound
from frontdoor_core.ids import new_id
from frontdoor_core.logging import get_logger
from frontdoor_core.metrics import DELIVERIES
from frontdoor_core.telemetry import inject_trace_context
from frontdoor_tenancy.credentials import Kek
from opentelemetry import trace

from .attempts import excerpt as excerpt_text
from .attempts import redacted_headers
from .delivery_outcome import ErrorClass, Verdict, classify, status_error_class
from .delivery_policy import DeliveryPolicy
from .endpoint_health import note_failure
from .endpoint_secrets import SIGNING_ORDER, open_secrets, signing_secrets
from .messages import Purpose, build_body, check_sendable, enqueue_event, next_event_sequence
from .retry_policy import next_attempt_at, parse_retry_after
from .sender import RESPONSE_LIMIT, Sender, SenderResponse, SendError
from .signing import webhook_headers

__all__ = ["ClaimedMessage", "DeliveredRecorder", "DeliveryReport", "PreClaimed", "SecretSource", "SettleHook", "Throttle",
           "claim", "deliver", "due_messages", "enqueue_claimed", "settle_unsent"]

_log = get_logger("frontdoor.webhooks")
_tracer = trace.get_tracer("frontdoor.webhooks")
# Events about delivery itself are not reported when they fail, or failures would echo. A
# conversation relay has one attempt and its failure is reported by its consequence (the
# conversation queued for a person, `frontdoor_conversations.relay_delivery`).
_NO_EXHAUSTION_EVENT = frozenset({"delivery.exhausted", "endpoint.disabled", "conversation.relay"})
# An attempt's settle in one statement: its row, the message's next state while the claim is
# still this one (compare-and-set; the answer is the message's ID, or none when the claim was
# lost), and for a delivery ($17) the end of the endpoint's failure streak.
#
# `state || '' = 'pending'`, here and in every statement that finds a message by its key
# (claims.py, delivered_batch.py): the state is checked on the row the key found and is never
# an index condition. Written `state = 'pending'`, it matches `webhook_messages_by_state`
# (tenant_id, state, ...); right after a burst, before autovacuum re-analyses the table, the
# statistics say almost nothing is pending, so the planner preferred that index to the
# unique key and read every pending row of the tenant (or, by skip scan, of all tenants) for
# each message: 250-530 ms per delivered batch with 30,000 pending (bench/README.md).
_SETTLE = """
WITH attempt AS (
  INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url, started_at, duration_ms,
                                response_status, error_class, response_excerpt, request_headers, next_attempt_at)
  VALUES ($1, $9, $2, $10, $3, $11, $12, $13, $7, $14, $15, $16, $6)
), settled AS (
  UPDATE webhook_messages SET state = $5, next_attempt_at = $6, locked_until = NULL, last_status = $7,
         delivered_at = CASE WHEN $5 = 'delivered' THEN $8 ELSE delivered_at END,
         finished_at = CASE WHEN $5 <> 'pending' THEN $8 END,
         failed_at = CASE WHEN $5 = 'delivered' THEN failed_at ELSE $8 END
   WHERE id = $2 AND tenant_id || '' = $1 AND state || '' = 'pending' AND attempts = $3 AND locked_until = $4
  RETURNING id
), healthy AS (
  UPDATE webhook_endpoints SET failing_since = NULL
   WHERE $17::boolean AND tenant_id = $1 AND id = $10 AND failing_since IS NOT NULL
     AND EXISTS (SELECT 1 FROM settled)
)
SELECT id FROM settled
"""
# A throttled message is deferred across the time its endpoint's due backlog takes to drain at
# its rate; the backlog is counted up to this many messages (a bounded index scan).
_THROTTLE_BACKLOG_CAP = 10_000


class ClaimedMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A message reserved to this process for one attempt.

    Attributes:
        attempt: This attempt's number (1 for the first).
        locked_until: The lease's end; the result is written only while it is ours.
        url: The endpoint's URL at claim time.
    """

    id: str
    tenant_id: str
    endpoint_id: str
    event_type: str
    body: str
    purpose: str
    operation_id: str | None
    attempt: int
    locked_until: datetime
    url: str
    rate_limit_per_second: int | None = None


class DeliveryReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one attempt did.

    Attributes:
        state: The message's state after it: ``delivered``, ``pending`` (retry at
            ``next_attempt_at``), ``exhausted`` or ``aborted``.
        status: The receiver's HTTP status; None when it did not answer.
        error_class: Why it failed (`ErrorClass` value); None when delivered.
        response_json: The answer's body parsed as JSON when it is JSON and was read
            whole, not cut at `RESPONSE_LIMIT` (a perform webhook's ``{"outcome", "result"}``);
            else None.
        endpoint_disabled: True when this attempt disabled the endpoint.
        recorded: False when the claim was lost before the result was written (a
            redelivery or an expired lease): the attempt row exists, the message's
            state was left to the newer claim.
    """

    message_id: str
    tenant_id: str
    endpoint_id: str
    purpose: str
    operation_id: str | None
    attempt_id: str
    attempt: int
    state: str
    status: int | None
    error_class: str | None
    response_json: Any = None
    next_attempt_at: datetime | None = None
    endpoint_disabled: bool = False
    recorded: bool = True


async def claim(conn: asyncpg.Connection, message_id: str, now: datetime, lease: timedelta, *,
                tenant_id: str | None = None) -> ClaimedMessage | None:
    """Reserve a due message for one attempt, or None when it is not claimable now.

    Claimable: pending, due, no live lease, and its endpoint enabled. Concurrent
    callers serialise on the row; the first takes the lease and the others see it.

    Args:
        message_id: The message.
        now: The claimer's time.
        lease: How long the claim lasts.
        tenant_id: When known, the claim also checks the message is this tenant's.
    """
    row = await conn.fetchrow(_CLAIM, message_id, now, lease, tenant_id)
    return None if row is None else ClaimedMessage(**dict(row))


_CLAIM = """
        UPDATE webhook_messages AS m
           SET attempts = m.attempts + 1, locked_until = $2::timestamptz + $3::interval
          FROM webhook_endpoints AS e
         WHERE m.id = $1 AND ($4::text IS NULL OR m.tenant_id || '' = $4)
           AND m.state || '' = 'pending' AND m.next_attempt_at <= $2
           AND (m.locked_until IS NULL OR m.locked_until < $2)
           AND e.tenant_id = m.tenant_id AND e.id = m.endpoint_id AND e.enabled
        RETURNING m.id, m.tenant_id, m.endpoint_id, m.event_type, m.body, m.purpose, m.operation_id,
                  m.attempts AS attempt, m.locked_until, e.url, e.rate_limit_per_second
        """
# The claim and the endpoint's signing secrets valid at the claim's time (as `signing_secrets`
# reads them, in its order) in one round trip; the secrets are read only when the claim won.
def _secrets_of(row: str, now: str) -> str:
    """The secret rows of ``row``'s endpoint valid at ``now`` (SQL), in `signing_secrets`' order."""
    return (f"FROM webhook_secrets AS s WHERE s.tenant_id = {row}.tenant_id AND s.endpoint_id = {row}.endpoint_id"
            f" AND (s.expires_at IS NULL OR s.expires_at > {now}) ORDER BY "
            + ", ".join(f"s.{term}" for term in SIGNING_ORDER.split(", ")))


_SECRETS_OF_CLAIM = _secrets_of("c", "$2")
_CLAIM_WITH_SECRETS = (f"WITH c AS ({_CLAIM}) SELECT c.*,"  # noqa: S608  (constants only)
                       f" ARRAY(SELECT s.id {_SECRETS_OF_CLAIM}) AS secret_ids,"
                       f" ARRAY(SELECT s.secret_ciphertext {_SECRETS_OF_CLAIM}) AS secret_blobs FROM c")
# A new message written already claimed by its writer (attempt 1, the lease from its due time),
# unless its endpoint is disabled: then it is parked and unclaimed, as `enqueue_message` writes
# it. With the claim, the endpoint's URL and rate limit and its secrets valid at that time. No
# notification: no deliverer has anything to claim (the writer attempts it; should the writer
# die first, the lease ends and a deliverer's next pass takes it).
_ENQUEUE_CLAIMED = (
    "WITH e AS (SELECT enabled, url, rate_limit_per_second FROM webhook_endpoints WHERE tenant_id = $1 AND id = $3),"  # noqa: S608
    " m AS (INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose, operation_id,"
    " next_attempt_at, created_at, parked, attempts, locked_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8,"
    " coalesce((SELECT NOT e.enabled FROM e), false), CASE WHEN (SELECT e.enabled FROM e) THEN 1 ELSE 0 END,"
    " CASE WHEN (SELECT e.enabled FROM e) THEN $8::timestamptz + $9::interval END)"
    " RETURNING id, tenant_id, endpoint_id, event_type, body, purpose, operation_id, attempts AS attempt,"
    " locked_until)"
    " SELECT m.*, e.url, e.rate_limit_per_second,"
    f" ARRAY(SELECT s.id {_secrets_of('m', '$8')}) AS secret_ids,"
    f" ARRAY(SELECT s.secret_ciphertext {_secrets_of('m', '$8')}) AS secret_blobs FROM m, e"
)


class PreClaimed(msgspec.Struct, frozen=True):
    """A message its writer claimed as it wrote it (`enqueue_claimed`), with its endpoint's secret rows."""

    message: ClaimedMessage
    secret_rows: list[tuple[str, bytes]]


async def enqueue_claimed(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, event_type: str,
                          data: dict[str, Any], *, purpose: Purpose, operation_id: str | None, now: datetime,
                          lease: timedelta, message_id: str) -> PreClaimed | None:
    """Write a message as `enqueue_message` does, claimed for its first attempt by the writer.

    For a writer that attempts the message itself as soon as its transaction commits (the
    ledger's confirm and its perform fast path): one statement instead of a write, a
    notification that wakes every deliverer for nothing, and a claim after the commit.
    The lease runs from ``now`` (the message's due time), as a claim at ``now`` would;
    until it ends no deliverer takes the message, so the writer must attempt it (`deliver`
    with ``claimed`` and ``claimed_secrets``) or, if it dies, the message waits for the
    lease.

    The caller's transaction must already hold the endpoint's parking lock (shared,
    `parking.HOLD_ENDPOINT_SQL`): a message for a disabled endpoint is written parked and
    unclaimed (None), exactly as `enqueue_message` writes it.

    Raises:
        Invalid: as `enqueue_message`.
        NotFound: No such endpoint for this tenant.
    """
    check_sendable(event_type, purpose)
    try:
        row = await conn.fetchrow(_ENQUEUE_CLAIMED, tenant_id, message_id, endpoint_id, event_type,
                                  build_body(event_type, data, now), purpose, operation_id, now, lease)
    except asyncpg.ForeignKeyViolationError:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.") from None
    assert row is not None  # the insert either wrote its row or raised
    fields = dict(row)
    rows = list(zip(fields.pop("secret_ids"), fields.pop("secret_blobs"), strict=True))
    if fields["locked_until"] is None:  # parked: its endpoint is disabled
        return None
    return PreClaimed(ClaimedMessage(**fields), rows)


async def _claim_with_secrets(conn: asyncpg.Connection, message_id: str, now: datetime, lease: timedelta,
                              tenant_id: str | None) -> tuple[ClaimedMessage, list[tuple[str, bytes]]] | None:
    """`claim`, and the claimed endpoint's secret rows for `open_secrets`, in one statement."""
    row = await conn.fetchrow(_CLAIM_WITH_SECRETS, message_id, now, lease, tenant_id)
    if row is None:
        return None
    fields = dict(row)
    rows = list(zip(fields.pop("secret_ids"), fields.pop("secret_blobs"), strict=True))
    return ClaimedMessage(**fields), rows


async def due_messages(conn: asyncpg.Connection, now: datetime, limit: int = 100,
                       exclude: Sequence[str] = ()) -> list[str]:
    """IDs of messages due at ``now`` (endpoint enabled, no live lease), oldest due first.

    Only unparked messages are looked at: a disabled endpoint's messages are parked (see
    `park_endpoint_messages`) and left out of the due index, so however many wait behind a
    disabled endpoint, this query never walks them.

    Rows are locked ``FOR UPDATE SKIP LOCKED`` until the caller's transaction ends, so
    callers running together each get different messages. ``exclude``: IDs to page past.
    (The deliverer claims in batches with `frontdoor_webhooks.claims.claim_due`.)
    """
    rows = await conn.fetch(
        """
        SELECT m.id FROM webhook_messages AS m
          JOIN webhook_endpoints AS e ON e.tenant_id = m.tenant_id AND e.id = m.endpoint_id
         WHERE m.state = 'pending' AND NOT m.parked AND m.next_attempt_at <= $1
           AND (m.locked_until IS NULL OR m.locked_until < $1) AND e.enabled
           AND m.id <> ALL($3::text[])
         ORDER BY m.next_attempt_at
         LIMIT $2
           FOR UPDATE OF m SKIP LOCKED
        """,
        now, limit, list(exclude),
    )
    return [r["id"] for r in rows]


class Throttle(Protocol):
    """Per-endpoint delivery rate, counted across processes."""

    async def wait(self, endpoint_id: str, per_second: int) -> float:
        """Seconds to wait before sending to ``endpoint_id`` (0: send now, and it counts)."""
        ...


_DEFER = """
UPDATE webhook_messages SET attempts = attempts - 1, locked_until = NULL, next_attempt_at = $5
 WHERE id = $2 AND tenant_id || '' = $1 AND state || '' = 'pending' AND attempts = $3 AND locked_until = $4
"""


async def _defer(conn: asyncpg.Connection, claimed: ClaimedMessage, until: datetime) -> None:
    """Hand a claim back unused: the attempt is not counted and the message is due at ``until``."""
    await conn.execute(
        _DEFER, claimed.tenant_id, claimed.id, claimed.attempt, claimed.locked_until, until)


async def _throttled_until(conn: asyncpg.Connection, claimed: ClaimedMessage, now: datetime, wait: float,
                           per_second: int) -> datetime:
    """When a throttled message is due again: spread over the time its endpoint's backlog needs.

    Deferring every throttled message by the same ``wait`` would make a large backlog come due
    (and be claimed and handed back) again every second. Instead each goes to a random point
    within how long the endpoint's due messages take to drain at ``per_second`` (the
    backlog counted up to a cap), plus a little jitter.
    """
    backlog = int(await conn.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM webhook_messages WHERE endpoint_id = $1 AND state = 'pending'"
        " AND NOT parked AND next_attempt_at <= $2 LIMIT $3) AS due",
        claimed.endpoint_id, now, _THROTTLE_BACKLOG_CAP))
    spread = backlog / per_second
    return now + timedelta(seconds=wait + random.uniform(0.0, spread) + random.uniform(0.0, 0.25))  # noqa: S311


SecretSource = Callable[[asyncpg.Pool, ClaimedMessage, datetime], Awaitable[list[str]]]
"""Gives a claimed message's signing secrets, valid at the time given (`deliver`'s ``secrets``)."""


class DeliveredRecorder(Protocol):
    """Records a clean ``2xx`` attempt: attempt row, message delivered, endpoint healthy (`deliver`'s ``delivered``)."""

    async def record(self, claimed: ClaimedMessage, *, started_at: datetime, duration_ms: int,
                     response: SenderResponse, headers: dict[str, str], ended: datetime) -> DeliveryReport:
        """Write it (committed when this returns) and answer the attempt's report."""
        ...


SettleHook = Callable[[asyncpg.Connection, DeliveryReport, SenderResponse | None], Awaitable[None]]
"""Writes an attempt's consequence in the transaction that settles it (`deliver`'s ``on_settle``).

Called with that transaction's connection, the attempt's report and the answer (None when
none came), after the attempt row and the message's next state are written. Whatever it
writes commits with them; if it raises, nothing of the attempt is written (the claim's
lease then ends and the message is claimed and sent again) and the exception propagates.
"""


def _parse_json(response: SenderResponse | None) -> Any:
    if response is None or not response.body or response.truncated or len(response.body) > RESPONSE_LIMIT:
        return None
    try:
        return msgspec.json.decode(response.body)
    except msgspec.DecodeError:
        return None


async def deliver(
    pool: asyncpg.Pool,
    message_id: str,
    *,
    sender: Sender,
    kek: Kek,
    clock: Clock,
    policy: DeliveryPolicy,
    tenant_id: str | None = None,
    accept: Callable[[SenderResponse], bool] | None = None,
    throttle: Throttle | None = None,
    on_settle: SettleHook | None = None,
    claimed: ClaimedMessage | None = None,
    secrets: SecretSource | None = None,
    delivered: DeliveredRecorder | None = None,
    claimed_secrets: list[tuple[str, bytes]] | None = None,
) -> DeliveryReport | None:
    """Make one attempt at a message if it can be claimed now.

    Args:
        pool: Connections are taken briefly before and after the request, never
            held during it.
        message_id: The message.
        sender: The transport (`SafeSender` in production).
        kek: Opens the endpoint's secrets.
        clock: The time source (signing timestamp, attempt times, schedule).
        policy: Timeout, retries, lease, disabling.
        tenant_id: When known, only this tenant's message is claimed.
        accept: A stricter success test for a ``2xx`` answer (the perform webhook needs a
            known outcome or ``202``); a ``2xx`` it refuses is retried as ``invalid_response``.
        throttle: Enforces endpoints' ``rate_limit_per_second`` (one counter across every
            process): over the limit, the claim is handed back and the message deferred by
            the wait, without using an attempt.
        on_settle: Writes the answer's consequence in the transaction that settles the
            attempt (see `SettleHook`); called for every settled attempt, also one whose
            claim was lost meanwhile (``recorded`` False).
        claimed: A message the caller already claimed (the deliverer claims due messages
            in batches, `frontdoor_webhooks.claims`); ``message_id`` must be its ID.
        secrets: Where the endpoint's signing secrets come from (the deliverer's short
            cache); default: read and decrypted for this attempt.
        delivered: Records a clean ``2xx`` of an attempt without ``on_settle`` (the
            deliverer's batches, `DeliveredBatch`); every other outcome is settled here.
        claimed_secrets: With ``claimed``, its endpoint's secret rows as read with the
            claim (`enqueue_claimed`): opened with ``kek`` instead of being read again.

    Returns:
        The attempt's report, or None when the message was not claimable (not due,
        finished, its endpoint disabled, or another process holds it) or was deferred
        by the throttle.

    Once a message is claimed its attempt is always settled: a failure of Frontdoor's own
    (a secret that does not open under the configured KEK, a malformed secret, a
    sender's bug) is recorded as a failed attempt of error class ``internal``, retried on
    the schedule and exhausted after the last one; the row names the exception's type,
    never its text.
    """
    now = clock()
    # read with the claim, when this claims and reads them (or the caller's claim did, `enqueue_claimed`)
    secret_rows: list[tuple[str, bytes]] | None = claimed_secrets if claimed is not None else None
    if claimed is None:
        async with pool.acquire() as conn:
            if secrets is None:
                won = await _claim_with_secrets(conn, message_id, now, policy.lease, tenant_id)
                if won is not None:
                    claimed, secret_rows = won
            else:
                claimed = await claim(conn, message_id, now, policy.lease, tenant_id=tenant_id)
    if claimed is None:
        return None
    try:
        if throttle is not None and claimed.rate_limit_per_second is not None:
            wait = await throttle.wait(claimed.endpoint_id, claimed.rate_limit_per_second)
            if wait > 0:
                async with pool.acquire() as conn:
                    until = await _throttled_until(conn, claimed, now, wait, claimed.rate_limit_per_second)
                    await _defer(conn, claimed, until)
                return None
        if secret_rows is not None:
            keys = open_secrets(secret_rows, claimed.tenant_id, claimed.endpoint_id, kek)
        elif secrets is not None:
            keys = await secrets(pool, claimed, now)
        else:
            async with pool.acquire() as conn:
                keys = await signing_secrets(conn, claimed.tenant_id, claimed.endpoint_id, kek, now)
    except Exception as exc:
        # Claimed, so the attempt is counted: it must be settled, or the message would be
        # claimed (and fail) again after every lease without a trace or an end.
        return await _settle_internal(pool, claimed, policy, clock, exc, started_at=now, on_settle=on_settle)
    headers: dict[str, str] = {}
    with _deliver_span(claimed) as span:
        started_at = clock()
        t0 = time.monotonic()
        response: SenderResponse | None = None
        error_class: str | None
        excerpt: bytes | str
        try:
            body = claimed.body.encode("utf-8")
            headers = webhook_headers(keys, claimed.id, int(now.timestamp()), body)
            inject_trace_context(headers)  # traceparent: the receiver joins the trace (W3C Trace Context)
            response = await sender.post(claimed.url, body, headers, policy.timeout.total_seconds())
            error_class = status_error_class(response.status)
            excerpt = response.body
            if error_class is None and 200 <= response.status < 300 and accept is not None and not accept(response):
                error_class = ErrorClass.INVALID_RESPONSE.value
        except SendError as exc:
            error_class, excerpt = exc.error_class.value, exc.detail
        except Exception as exc:  # a malformed secret, a sender's bug: never the exception's text (secrets)
            response = None
            error_class, excerpt = ErrorClass.INTERNAL.value, _internal_detail(exc)
            _log.warning("webhook_attempt_internal_error", message_id=claimed.id, tenant_id=claimed.tenant_id,
                         error=type(exc).__name__)
        duration_ms = int((time.monotonic() - t0) * 1000)
        if response is not None:
            span.set_attribute("http.response.status_code", response.status)
    if (delivered is not None and on_settle is None and response is not None and error_class is None
            and 200 <= response.status < 300):
        report = await delivered.record(claimed, started_at=started_at, duration_ms=duration_ms, response=response,
                                        headers=headers, ended=clock())
    else:
        report = await _settle(pool, claimed, policy, clock, started_at=started_at, duration_ms=duration_ms,
                               response=response, error_class=error_class, excerpt=excerpt, headers=headers,
                               on_settle=on_settle)
    DELIVERIES.labels(claimed.purpose, report.state, report.error_class or "none").inc()
    # A delivery is already its attempt row and the deliveries metric; at level info, rendering
    # a line for each (redaction, JSON) cost ~55 µs, a sixth of a delivery's CPU. Debug level
    # shows them; every other outcome is logged at info as before.
    log = _log.debug if report.state == "delivered" else _log.info
    log("webhook_attempt", message_id=claimed.id, tenant_id=claimed.tenant_id, endpoint_id=claimed.endpoint_id,
        attempt=claimed.attempt, status=report.status, error_class=report.error_class, state=report.state,
        duration_ms=duration_ms)
    return report


def _deliver_span(claimed: ClaimedMessage) -> AbstractContextManager[trace.Span]:
    """The attempt's span, current while it is sent (its ``traceparent`` goes on the request).

    With no tracer provider installed nothing records spans: the no-op tracer would only hand
    back the caller's span context, so that context is used as it is (the same
    ``traceparent``, a caller's trace still flows on) without making a span per attempt.
    """
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return contextlib.nullcontext(trace.get_current_span())
    return _tracer.start_as_current_span("webhook.deliver", attributes={
        "webhook.message_id": claimed.id, "webhook.attempt": claimed.attempt, "frontdoor.tenant_id": claimed.tenant_id,
    })


def _internal_detail(exc: BaseException) -> str:
    """What an attempt row says of an internal failure: the exception's type, never its text."""
    return f"internal error ({type(exc).__name__}); nothing was sent"


async def _settle_internal(pool: asyncpg.Pool, claimed: ClaimedMessage, policy: DeliveryPolicy, clock: Clock,
                           exc: Exception, *, started_at: datetime,
                           on_settle: SettleHook | None = None) -> DeliveryReport:
    """Settle a claimed attempt that failed before anything was sent, as ``internal``."""
    _log.warning("webhook_attempt_internal_error", message_id=claimed.id, tenant_id=claimed.tenant_id,
                 endpoint_id=claimed.endpoint_id, attempt=claimed.attempt, error=type(exc).__name__)
    return await _settle(pool, claimed, policy, clock, started_at=started_at, duration_ms=0, response=None,
                         error_class=ErrorClass.INTERNAL.value, excerpt=_internal_detail(exc), headers={},
                         on_settle=on_settle)


async def settle_unsent(pool: asyncpg.Pool, claimed: ClaimedMessage, *, policy: DeliveryPolicy, clock: Clock,
                        reason: str, on_settle: SettleHook | None = None) -> DeliveryReport:
    """Settle a claimed attempt as failed (``internal``) without sending it, as `deliver` settles one.

    For a caller that gives up on a message before sending it (a relay claimed again and
    again whose settle never committed): the attempt row names ``reason`` (no secret, no
    exception text), the message is retried on ``policy``'s schedule or exhausted.
    """
    now = clock()
    report = await _settle(pool, claimed, policy, clock, started_at=now, duration_ms=0, response=None,
                           error_class=ErrorClass.INTERNAL.value, excerpt=f"{reason}; nothing was sent", headers={},
                           on_settle=on_settle)
    DELIVERIES.labels(claimed.purpose, report.state, report.error_class or "none").inc()
    return report


def _verdict(claimed: ClaimedMessage, policy: DeliveryPolicy, ended: datetime, response: SenderResponse | None,
             error_class: str | None) -> tuple[Verdict, str | None, datetime | None, str]:
    """The verdict, error class, retry time and next state of an attempt."""
    status = None if response is None else response.status
    verdict = classify(status, {} if response is None else response.headers)
    if verdict is Verdict.DELIVERED and error_class is not None:
        verdict = Verdict.RETRY  # a 2xx the caller's `accept` refused: the outcome is unknown
    if response is not None and verdict is Verdict.RETRY and error_class is None:
        error_class = ErrorClass.INVALID_RESPONSE.value  # 1xx or other non-final status
    retry_at: datetime | None = None
    if verdict is Verdict.DELIVERED:
        state = "delivered"
    elif verdict is Verdict.ABORT:
        state = "aborted"
    else:
        retry_after = None if response is None else parse_retry_after(response.headers.get("retry-after"), ended)
        retry_at = next_attempt_at(claimed.attempt, ended, policy.retry, retry_after=retry_after)
        state = "pending" if retry_at is not None else "exhausted"
    return verdict, error_class, retry_at, state


async def _settle(
    pool: asyncpg.Pool,
    claimed: ClaimedMessage,
    policy: DeliveryPolicy,
    clock: Clock,
    *,
    started_at: datetime,
    duration_ms: int,
    response: SenderResponse | None,
    error_class: str | None,
    excerpt: bytes | str,
    headers: dict[str, str],
    on_settle: SettleHook | None = None,
) -> DeliveryReport:
    """Write the attempt, the message's next state, the endpoint's health and ``on_settle``'s part, atomically.

    Nothing in the answer may keep the attempt from being recorded: should reading it fail
    (a header nobody foresaw), the attempt is recorded as a failed one, retried on the
    schedule.
    """
    ended = clock()
    status = None if response is None else response.status
    try:
        verdict, error_class, retry_at, state = _verdict(claimed, policy, ended, response, error_class)
    except Exception as exc:
        _log.warning("webhook_answer_unreadable", message_id=claimed.id, error=type(exc).__name__)
        verdict, error_class = Verdict.RETRY, ErrorClass.INVALID_RESPONSE.value
        retry_at = next_attempt_at(claimed.attempt, ended, policy.retry)
        state = "pending" if retry_at is not None else "exhausted"
    attempt_id = new_id("att")
    # A clean delivery with no hook is one statement (its own transaction); anything that
    # writes more (a failure streak, an exhaustion event, the hook's consequence) shares one.
    simple = on_settle is None and verdict is Verdict.DELIVERED
    async with pool.acquire() as conn, (contextlib.nullcontext() if simple else conn.transaction()):
        still_ours = await conn.fetchval(
            _SETTLE, claimed.tenant_id, claimed.id, claimed.attempt, claimed.locked_until, state, retry_at, status,
            ended, attempt_id, claimed.endpoint_id, claimed.url, started_at, duration_ms, error_class,
            excerpt_text(excerpt), redacted_headers(headers), verdict is Verdict.DELIVERED,
        )
        disabled = False
        if still_ours is not None:
            if verdict is not Verdict.DELIVERED:  # a success ended the failure streak in _SETTLE
                disabled = await note_failure(conn, claimed.tenant_id, claimed.endpoint_id, started_at=started_at,
                                              now=ended, disable_after=policy.disable_after,
                                              gone=verdict is Verdict.GONE)
            if state == "exhausted" and claimed.event_type not in _NO_EXHAUSTION_EVENT:
                await enqueue_event(conn, claimed.tenant_id, "delivery.exhausted",
                                    {"message_id": claimed.id, "endpoint_id": claimed.endpoint_id,
                                     "event_type": claimed.event_type, "attempts": claimed.attempt,
                                     "sequence": await next_event_sequence(conn)},
                                    ended, exclude_endpoint=claimed.endpoint_id)
        report = DeliveryReport(
            message_id=claimed.id, tenant_id=claimed.tenant_id, endpoint_id=claimed.endpoint_id,
            purpose=claimed.purpose, operation_id=claimed.operation_id, attempt_id=attempt_id, attempt=claimed.attempt,
            state=state if still_ours is not None else "pending", status=status, error_class=error_class,
            response_json=_parse_json(response), next_attempt_at=retry_at, endpoint_disabled=disabled,
            recorded=still_ours is not None,
        )
        if on_settle is not None:
            await on_settle(conn, report, response)
    return report
