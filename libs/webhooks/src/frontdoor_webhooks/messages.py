"""The webhook outbox: messages, written in the transaction of the change they report.

A message is one body for one endpoint. Its body, ``{"type", "timestamp", "data"}`` as
compact JSON, is built once when it is written and sent byte for byte on every attempt,
under the same ``webhook-id`` (the message ID), so receivers can de-duplicate. Writing
one also sends ``pg_notify('frontdoor_webhooks', <message id>)`` at commit: a cheap
wake-up for a deliverer listening, which still reads the table (the notification carries
nothing else and may be lost).

States: ``pending`` (waiting for ``next_attempt_at``, or, parked, for its endpoint to
be enabled: see `parking`), ``delivered``, ``exhausted`` (the schedule ran out),
``aborted`` (the receiver said ``webhook-delivery: abort``) and ``superseded`` (stopped
before it was delivered: see `supersede_message`).

A message whose subject no longer wants it sent (the perform message of an operation that
became final) has ``superseded_at`` set, whatever its state: redelivery refuses it
(``409 webhook_message_superseded``) and recovery leaves it out, so it is never sent again.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .event_payloads import payload_for
from .event_types import EVENT_TYPES, PERFORM, RELAY, TEST_EVENT
from .parking import hold_endpoint, in_transaction

__all__ = [
    "NOTIFY_CHANNEL",
    "SUBSCRIBERS_SQL",
    "SUPERSEDE_SET",
    "Message",
    "MessageState",
    "Purpose",
    "build_body",
    "check_sendable",
    "enqueue_event",
    "enqueue_message",
    "get_message",
    "list_messages",
    "lock_message",
    "next_event_sequence",
    "prune",
    "recover",
    "redeliver",
    "send_test",
    "supersede_message",
]

NOTIFY_CHANNEL = "frontdoor_webhooks"
MessageState = Literal["pending", "delivered", "exhausted", "aborted", "superseded"]
Purpose = Literal["event", "perform", "relay"]
_SENDABLE = frozenset({*EVENT_TYPES, PERFORM, RELAY, TEST_EVENT})
_PURPOSE_TYPES = {"perform": PERFORM, "relay": RELAY}
_COLUMNS = ("id, tenant_id, endpoint_id, event_type, body, purpose, operation_id, state, attempts, next_attempt_at,"
            " created_at, delivered_at, last_status, superseded_at")


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One outbox row.

    Attributes:
        id: ``msg_...``, sent as ``webhook-id``.
        body: The exact JSON text sent.
        purpose: ``event`` (a subscription), ``perform`` (the perform webhook) or ``relay`` (a conversation relay).
        operation_id: The operation a message is about, when it is about one.
        attempts: Attempts claimed so far.
        next_attempt_at: When the next attempt is due; None once finished.
        last_status: HTTP status of the latest attempt, None when it got no answer.
        superseded_at: When its subject stopped wanting it sent (a perform message whose
            operation became final); from then on it is never sent again. None otherwise.
    """

    id: str
    tenant_id: str
    endpoint_id: str
    event_type: str
    body: str
    purpose: str
    operation_id: str | None
    state: str
    attempts: int
    next_attempt_at: datetime | None
    created_at: datetime
    delivered_at: datetime | None
    last_status: int | None
    superseded_at: datetime | None = None

    @property
    def resendable(self) -> bool:
        """Whether a redelivery may send it again (never once superseded)."""
        return self.state != "superseded" and self.superseded_at is None


def _message(row: asyncpg.Record) -> Message:
    return Message(**dict(row))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_body(event_type: str, data: dict[str, Any], now: datetime) -> str:
    """The JSON text of a message: ``{"type", "timestamp", "data"}``, compact, UTC ``Z`` time."""
    return msgspec.json.encode({"type": event_type, "timestamp": _iso(now), "data": data}).decode("utf-8")


def check_sendable(event_type: str, purpose: str) -> None:
    """Refuse a message that cannot be sent: an unknown type, or a purpose that does not fit it.

    Raises:
        Invalid: ``invalid_event_type`` or ``invalid_purpose``.
    """
    if event_type not in _SENDABLE:
        raise Invalid("invalid_event_type", "Unknown webhook event type.", fields={"event_type": "unknown"})
    for special, special_type in _PURPOSE_TYPES.items():
        if (purpose == special) != (event_type == special_type):
            raise Invalid("invalid_purpose", f"{special_type}, and only it, has the purpose {special}.")


async def enqueue_message(
    conn: asyncpg.Connection,
    tenant_id: str,
    endpoint_id: str,
    event_type: str,
    data: dict[str, Any],
    *,
    purpose: Purpose,
    operation_id: str | None = None,
    now: datetime,
    message_id: str | None = None,
    endpoint_held: bool = False,
) -> str:
    """Write one pending message for one endpoint, due at ``now``, in the caller's transaction.

    Args:
        tenant_id: The tenant owning the endpoint.
        endpoint_id: The receiving endpoint (any state; a disabled one's messages wait).
        event_type: A catalogue type, ``operation.perform``, ``conversation.relay`` or ``webhook.test``.
        data: The event's payload: identifiers and facts, never a token or secret.
        purpose: ``event``, ``perform`` or ``relay`` (a conversation relay, `frontdoor_conversations.relay`).
        operation_id: The operation this is about, if any (the ledger finds it by this).
        now: The message's time (body ``timestamp`` and first due time).
        message_id: A ``msg_`` ID the caller made with ``new_id("msg")`` and already wrote
            beside its subject in the same transaction (the ledger's confirm); a new one if None.
        endpoint_held: The caller's transaction already holds the endpoint's parking lock
            shared, taken by a statement before this one (`parking.HOLD_ENDPOINT_SQL`; the
            ledger's compare-and-set takes it): not taken again.

    Returns:
        The message ID.

    Raises:
        Invalid: ``invalid_event_type``, or the purpose does not fit the type.
        NotFound: No such endpoint for this tenant.
    """
    check_sendable(event_type, purpose)
    message_id = message_id or new_id("msg")
    try:
        async with in_transaction(conn):
            if not (endpoint_held and conn.is_in_transaction()):
                await hold_endpoint(conn, endpoint_id)  # an endpoint being enabled now unparks this message
            # A disabled endpoint's message waits parked; one that is not wakes a deliverer at
            # commit: the insert and its notification in one round trip.
            await conn.execute(
                "WITH m AS (INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose,"
                " operation_id, next_attempt_at, created_at, parked) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8,"
                " coalesce((SELECT NOT e.enabled FROM webhook_endpoints AS e WHERE e.tenant_id = $1 AND e.id = $3),"
                " false)) RETURNING parked) SELECT pg_notify($9, $2) FROM m WHERE NOT m.parked",
                tenant_id, message_id, endpoint_id, event_type, build_body(event_type, data, now), purpose,
                operation_id, now, NOTIFY_CHANNEL,
            )
    except asyncpg.ForeignKeyViolationError:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.") from None
    return message_id


async def enqueue_event(
    conn: asyncpg.Connection,
    tenant_id: str,
    event_type: str,
    data: dict[str, Any],
    now: datetime,
    *,
    exclude_endpoint: str | None = None,
    subscribers: list[str] | None = None,
) -> list[str]:
    """Write one message per endpoint of the tenant subscribed to ``event_type``.

    Disabled endpoints get theirs too: they wait until it is enabled again.

    Args:
        exclude_endpoint: An endpoint not to notify (the one an ``endpoint.disabled``
            or ``delivery.exhausted`` event is about).
        subscribers: The subscribed endpoints' IDs, already read by an earlier statement of
            the caller's transaction (`SUBSCRIBERS_SQL`, the ledger's compare-and-set and
            outcome); read here if None.

    Returns:
        The message IDs, one per subscribed endpoint (none without subscribers).

    Raises:
        Invalid: ``event_type`` is not in the catalogue.
    """
    if event_type not in EVENT_TYPES:
        raise Invalid("invalid_event_type", "Unknown webhook event type.", fields={"event_type": "unknown"})
    if subscribers is None:
        subscribers = [r["id"] for r in await conn.fetch(
            "SELECT id FROM webhook_endpoints WHERE tenant_id = $1 AND event_types @> ARRAY[$2::text]"
            " AND ($3::text IS NULL OR id <> $3) ORDER BY id",
            tenant_id, event_type, exclude_endpoint,
        )]
    else:
        subscribers = [e for e in subscribers if e != exclude_endpoint]
    return [await enqueue_message(conn, tenant_id, endpoint_id, event_type, data, purpose="event", now=now)
            for endpoint_id in subscribers]


SUBSCRIBERS_SQL = ("ARRAY(SELECT se.id FROM webhook_endpoints AS se WHERE se.tenant_id = {tenant}"
                   " AND se.event_types @> ARRAY[({event})::text] ORDER BY se.id)")
"""`enqueue_event`'s lookup as an expression (``{tenant}``, ``{event}``: SQL for the tenant and the event
type): for a statement that reads the subscribers with its own change (``subscribers``)."""


async def next_event_sequence(conn: asyncpg.Connection) -> int:
    """A fresh ``sequence`` for an event this library writes itself (see `event_payloads`)."""
    return int(await conn.fetchval("SELECT nextval('webhook_event_sequence')"))


async def send_test(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, now: datetime) -> str:
    """Queue a ``webhook.test`` message to one endpoint (enabled or not); return its ID.

    It is delivered, signed and retried like any message, so it proves the whole path.

    Raises:
        NotFound: No such endpoint for this tenant.
    """
    data = payload_for(TEST_EVENT, {"endpoint_id": endpoint_id, "sequence": await next_event_sequence(conn)})
    message_id = await enqueue_message(conn, actor.tenant_id, endpoint_id, TEST_EVENT, data, purpose="event",
                                       now=now)
    await audit.record(conn, actor, "webhook_endpoint.test_sent", target_type="webhook_endpoint",
                       target_id=endpoint_id, details={"message_id": message_id}, at=now)
    return message_id


async def get_message(conn: asyncpg.Connection, tenant_id: str, message_id: str) -> Message:
    """The message by ID.

    Raises:
        NotFound: ``webhook_message_not_found`` (also for another tenant's message).
    """
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM webhook_messages WHERE tenant_id = $1 AND id = $2",  # noqa: S608
                              tenant_id, message_id)
    if row is None:
        raise NotFound("webhook_message_not_found", "No such webhook message.")
    return _message(row)


async def list_messages(conn: asyncpg.Connection, tenant_id: str, *, endpoint_id: str | None = None,
                        state: str | None = None, before: str | None = None, limit: int = 50) -> list[Message]:
    """Newest first; ``before`` is the last ID of the previous page."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM webhook_messages WHERE tenant_id = $1"  # noqa: S608
        " AND ($2::text IS NULL OR endpoint_id = $2) AND ($3::text IS NULL OR state = $3)"
        " AND ($4::text IS NULL OR id < $4) ORDER BY id DESC LIMIT $5",
        tenant_id, endpoint_id, state, before, min(max(limit, 1), 500),
    )
    return [_message(r) for r in rows]


async def redeliver(conn: asyncpg.Connection, actor: Actor, message_id: str, *, now: datetime) -> Message:
    """Send a message again, whatever its state, with the same ``webhook-id``, unless superseded.

    It becomes pending, due at ``now``, with a fresh schedule. A lease held by a
    process sending it right now is respected (claims wait for it). A superseded message
    (the perform message of an operation that is final, delivered or not) is refused: the
    check is the ``UPDATE``'s own condition, so a supersede committing meanwhile either
    comes first (refused) or finds the message pending and supersedes it.

    Raises:
        NotFound: No such message for this tenant.
        Conflict: ``webhook_message_superseded``.
    """
    async with in_transaction(conn):
        endpoint_id = await conn.fetchval("SELECT endpoint_id FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
                                          actor.tenant_id, message_id)
        if endpoint_id is not None:
            await hold_endpoint(conn, endpoint_id)  # parked when its endpoint is disabled (see `parking`)
        row = await conn.fetchrow(
            "UPDATE webhook_messages SET state = 'pending', attempts = 0, next_attempt_at = $3, finished_at = NULL,"  # noqa: S608
            " failed_at = NULL,"
            " parked = coalesce((SELECT NOT e.enabled FROM webhook_endpoints AS e"
            " WHERE e.tenant_id = $1 AND e.id = webhook_messages.endpoint_id), false)"
            " WHERE tenant_id = $1 AND id = $2 AND state <> 'superseded' AND superseded_at IS NULL"
            " RETURNING " + _COLUMNS,
            actor.tenant_id, message_id, now,
        )
    if row is None:
        if await conn.fetchval("SELECT 1 FROM webhook_messages WHERE tenant_id = $1 AND id = $2",
                               actor.tenant_id, message_id):
            raise Conflict("webhook_message_superseded",
                           "This perform message's operation is final: it is never sent again.")
        raise NotFound("webhook_message_not_found", "No such webhook message.")
    await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, message_id)
    await audit.record(conn, actor, "webhook_message.redelivered", target_type="webhook_message",
                       target_id=message_id, at=now)
    return _message(row)


async def recover(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, since: datetime,
                  now: datetime) -> int:
    """Queue again every exhausted or aborted message of an endpoint created since ``since``.

    For after an outage the company has fixed. Messages keep their IDs. Superseded ones
    (a final operation's perform) are left out.

    Returns:
        How many messages were queued again.

    Raises:
        NotFound: No such endpoint for this tenant.
    """
    found = await conn.fetchval("SELECT id FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2",
                                actor.tenant_id, endpoint_id)
    if found is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    async with in_transaction(conn):
        await hold_endpoint(conn, endpoint_id)  # parked when the endpoint is disabled (see `parking`)
        ids = await conn.fetch(
            "UPDATE webhook_messages SET state = 'pending', attempts = 0, next_attempt_at = $4, finished_at = NULL,"
            " failed_at = NULL,"
            " parked = coalesce((SELECT NOT e.enabled FROM webhook_endpoints AS e WHERE e.tenant_id = $1"
            " AND e.id = $2), false)"
            " WHERE tenant_id = $1 AND endpoint_id = $2 AND created_at >= $3 AND state IN ('exhausted', 'aborted')"
            " AND superseded_at IS NULL RETURNING id",
            actor.tenant_id, endpoint_id, since, now,
        )
    await audit.record(conn, actor, "webhook_endpoint.recovered", target_type="webhook_endpoint",
                       target_id=endpoint_id, details={"since": _iso(since), "messages": len(ids)}, at=now)
    if ids:
        await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, ids[0]["id"])
    return len(ids)


async def prune(conn: asyncpg.Connection, now: datetime, retention: timedelta, *, limit: int = 10_000) -> int:
    """Delete finished messages (and their attempts) finished longer than ``retention`` ago, all tenants.

    A maintenance job: pending messages are never pruned. A message's age counts from
    when it finished (``finished_at``; for rows older than that column, ``delivered_at``,
    else ``created_at``). At most ``limit`` per call, so a large backlog is cleared in
    several short transactions (the caller loops). The delete re-checks both conditions
    on the row it deletes, so a message redelivered meanwhile is kept; rows another
    transaction holds are skipped.

    Returns:
        How many messages were deleted.
    """
    deleted = await conn.fetchval(
        "WITH doomed AS (SELECT tenant_id, id FROM webhook_messages"
        " WHERE state <> 'pending' AND coalesce(finished_at, delivered_at, created_at) < $1"
        " LIMIT $2 FOR UPDATE SKIP LOCKED),"
        " gone AS (DELETE FROM webhook_messages AS m USING doomed AS d"
        " WHERE m.tenant_id = d.tenant_id AND m.id = d.id"
        " AND m.state <> 'pending' AND coalesce(m.finished_at, m.delivered_at, m.created_at) < $1"
        " RETURNING 1) SELECT count(*) FROM gone",
        now - retention, limit,
    )
    return int(deleted)


async def lock_message(conn: asyncpg.Connection, tenant_id: str, message_id: str) -> None:
    """Lock a message's row until the caller's transaction ends.

    For a transaction that will change both a message and the subject it is about (a final
    operation superseding its perform): it locks the message first, in the order the
    delivery engine takes them when settling an answer (the message, then the ledger), so
    the two never deadlock.
    """
    await conn.execute("SELECT 1 FROM webhook_messages WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
                       tenant_id, message_id)


async def supersede_message(conn: asyncpg.Connection, tenant_id: str, message_id: str, *, now: datetime) -> bool:
    """Stop a message for good: its subject no longer wants it sent (a final operation's perform).

    Called in the transaction that makes the subject final. Whatever the message's state,
    ``superseded_at`` is set: redelivery and recovery never re-queue it. One not yet
    delivered (pending, exhausted, aborted) also becomes ``superseded``, a terminal state
    retries never leave; a delivered one stays ``delivered`` (what delivery did is kept). A
    process sending it at this moment keeps its lease, but its result is not written over it
    (settling requires ``pending``).

    Returns:
        True when it was not yet delivered (it became ``superseded``).
    """
    # One statement: the sub-select locks the row and keeps the state it had (no pruned row, no
    # answer), the UPDATE changes that same locked row.
    was = await conn.fetchval(
        "UPDATE webhook_messages AS m SET " + SUPERSEDE_SET.format(now="$3") +  # noqa: S608  (a constant)
        " FROM (SELECT tenant_id, id, state FROM webhook_messages WHERE tenant_id = $1 AND id = $2 FOR UPDATE) AS old"
        " WHERE m.tenant_id = old.tenant_id AND m.id = old.id RETURNING old.state",
        tenant_id, message_id, now)
    return bool(was in ("pending", "exhausted", "aborted"))


SUPERSEDE_SET = ("superseded_at = coalesce(m.superseded_at, {now}),"
                 " state = CASE WHEN m.state IN ('pending', 'exhausted', 'aborted') THEN 'superseded' ELSE m.state END,"
                 " locked_until = CASE WHEN m.state = 'delivered' THEN m.locked_until END,"
                 " finished_at = CASE WHEN m.state IN ('pending', 'exhausted', 'aborted') THEN {now}"
                 " ELSE m.finished_at END")
"""`supersede_message`'s ``SET`` list for ``UPDATE webhook_messages AS m``, ``{now}`` its time's placeholder:
for a statement that supersedes a message it already holds locked (the ledger's outcome)."""
