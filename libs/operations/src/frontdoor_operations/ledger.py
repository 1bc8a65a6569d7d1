"""The ledger's storage: operations, their revisions, and every transition as a compare-and-set.

Each transition is one ``UPDATE … WHERE state = <expected> … RETURNING`` in PostgreSQL:
whatever the concurrency, the number of replicas or the channel (agent or website), at
most one confirm wins (OPS-6-02). The webhook messages a transition causes (the perform
call, the event notifications) are inserted in the same transaction (the outbox), so a
committed transition is never without its notification and vice versa.

Every function takes the tenant and scopes every query by it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id
from frontdoor_webhooks.delivery import PreClaimed
from frontdoor_webhooks.messages import SUBSCRIBERS_SQL, SUPERSEDE_SET, supersede_message
from frontdoor_webhooks.parking import HOLD_ENDPOINT_SQL

from . import events
from .kinds import ConfirmTargets, Kind, get_kind, is_kind_name
from .rules import CallerView, OperationView, cancelled_result, expired_result, is_lapsed, validate_result

__all__ = [
    "ListFilters",
    "Operation",
    "Proposal",
    "Revision",
    "cancel",
    "clear_attention",
    "confirm",
    "confirm_claimed",
    "expire",
    "expire_due",
    "flag_attention",
    "get_operation",
    "get_operation_to_confirm",
    "is_operation_id",
    "list_operations",
    "propose",
    "record_outcome",
    "revise",
    "revisions",
    "to_wire",
]

MAX_SUMMARY: Final = 2000
MAX_URL: Final = 2048
MAX_ACTION_KEY: Final = 200
PERFORM_EVENT: Final = "operation.perform"


class Operation(msgspec.Struct, frozen=True, kw_only=True):
    """An operation with its latest revision."""

    id: str
    tenant_id: str
    kind: str
    client_id: str
    user_id: str
    account_id: str | None
    session_id: str
    state: Literal["proposed", "in_progress", "succeeded", "failed", "cancelled", "expired"]
    revision: int
    action_key: str | None
    scopes: list[str]
    input: Any
    url: str | None
    expires_at: datetime
    confirmed_revision: int | None
    approved_by: Literal["user", "standing_permission"] | None
    confirmed_at: datetime | None
    confirmed_via: Literal["agent", "website"] | None
    perform_message_id: str | None
    result: dict[str, Any] | None
    finished_at: datetime | None
    attention: str | None
    sequence: int
    created_at: datetime
    updated_at: datetime
    summary: str
    terms: dict[str, Any] | None
    user_approval_required: bool

    def view(self) -> OperationView:
        """What the pure rules read."""
        return OperationView(state=self.state, revision=self.revision, client_id=self.client_id,
                             user_id=self.user_id, account=self.account_id, expires_at=self.expires_at,
                             user_approval_required=self.user_approval_required, scopes=tuple(self.scopes))


class Revision(msgspec.Struct, frozen=True, kw_only=True):
    """One immutable revision (OPS-3.1-01)."""

    revision: int
    summary: str
    terms: dict[str, Any] | None
    user_approval_required: bool
    expires_at: datetime
    created_at: datetime


class Proposal(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a company proposes (the ledger API's body, minus ``caller``)."""

    kind: str
    summary: str
    terms: dict[str, Any] | None = None
    user_approval_required: bool = True
    expires_in: int | None = None
    action_key: str | None = None
    input: dict[str, Any] | None = None
    url: str | None = None


class ListFilters(msgspec.Struct, frozen=True, kw_only=True):
    """The company's list filters; all optional."""

    state: str | None = None
    kind: str | None = None
    account: str | None = None
    client_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    attention: bool | None = None


_CONFIRMED_EVENT: Final = "'operation.confirmed'"  # as SQL, for the compare-and-set's subscribers
_OP_COLS: Final = (
    "o.id, o.tenant_id, o.kind, o.client_id, o.user_id, o.account_id, o.session_id, o.state, o.revision,"
    " o.action_key, o.scopes, o.input, o.url, o.expires_at, o.confirmed_revision, o.approved_by, o.confirmed_at,"
    " o.confirmed_via, o.perform_message_id, o.result, o.finished_at, o.attention, o.sequence, o.created_at,"
    " o.updated_at, r.summary, r.terms, r.user_approval_required"
)
_FROM: Final = (" FROM operations o JOIN operation_revisions r"
                " ON r.operation_id = o.id AND r.revision = o.revision")


def _op(row: asyncpg.Record) -> Operation:
    return msgspec.convert(dict(row), Operation)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_wire(op: Operation) -> dict[str, Any]:
    """The operation object of the Operations extension (§3), as agents and companies see it.

    Optional members without a value are absent (``terms``, ``url``); ``confirmation`` and
    ``result`` are ``null`` until something happens.
    """
    wire: dict[str, Any] = {
        "operation_id": op.id,
        "revision": op.revision,
        "state": op.state,
        "summary": op.summary,
    }
    if op.terms is not None:
        wire["terms"] = op.terms
    wire["expires_at"] = _iso(op.expires_at)
    wire["user_approval_required"] = op.user_approval_required
    if op.url is not None:
        wire["url"] = op.url
    wire["confirmation"] = None if op.confirmed_at is None else {
        "revision": op.confirmed_revision,
        "approved_by": op.approved_by,
        "confirmed_at": _iso(op.confirmed_at),
    }
    wire["result"] = op.result
    return wire


def event_data(op: Operation) -> dict[str, Any]:
    """An ``operation.*`` event's ``data``: the operation, whose it is, and its sequence."""
    return {"operation": to_wire(op), "kind": op.kind, "account": op.account_id, "client_id": op.client_id,
            "user_id": op.user_id, "sequence": op.sequence}


_OPERATION_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,100}")


def is_operation_id(value: str) -> bool:
    """Whether ``value`` could be an operation ID (the URL-safe alphabet, bounded): others are unknown."""
    return _OPERATION_ID.fullmatch(value) is not None


async def get_operation(conn: asyncpg.Connection, tenant_id: str, operation_id: str) -> Operation | None:
    """The operation with its latest revision, or ``None`` (also for another tenant's)."""
    if not is_operation_id(operation_id):
        return None
    row = await conn.fetchrow(f"SELECT {_OP_COLS}{_FROM} WHERE o.tenant_id = $1 AND o.id = $2",
                              tenant_id, operation_id)
    return _op(row) if row else None


async def get_operation_to_confirm(conn: asyncpg.Connection, tenant_id: str,
                                   operation_id: str) -> tuple[Operation, ConfirmTargets] | None:
    """The operation (as `get_operation`) and what a confirm needs of its kind
    (`kinds.confirm_targets`), in one statement: the confirm endpoint's read."""
    if not is_operation_id(operation_id):
        return None
    row = await conn.fetchrow(
        f"SELECT {_OP_COLS}, coalesce(e.enabled, false) AS perform_enabled, k.reprice_endpoint_id{_FROM}"
        " LEFT JOIN operation_kinds k ON k.tenant_id = o.tenant_id AND k.name = o.kind"
        " LEFT JOIN webhook_endpoints e ON e.tenant_id = k.tenant_id AND e.id = k.perform_endpoint_id"
        " WHERE o.tenant_id = $1 AND o.id = $2", tenant_id, operation_id)
    if row is None:
        return None
    fields = dict(row)
    targets = ConfirmTargets(perform_enabled=bool(fields.pop("perform_enabled")),
                             reprice_endpoint_id=fields.pop("reprice_endpoint_id"))
    return msgspec.convert(fields, Operation), targets


async def revisions(conn: asyncpg.Connection, tenant_id: str, operation_id: str) -> list[Revision]:
    """Every revision of an operation, oldest first."""
    rows = await conn.fetch(
        "SELECT revision, summary, terms, user_approval_required, expires_at, created_at FROM operation_revisions"
        " WHERE tenant_id = $1 AND operation_id = $2 ORDER BY revision", tenant_id, operation_id)
    return [msgspec.convert(dict(r), Revision) for r in rows]


def _no_nul(value: object) -> bool:
    """PostgreSQL text and jsonb hold no NUL character: such input is refused, not stored."""
    encoded = msgspec.json.encode(value)
    return b"\\u0000" not in encoded and b"\x00" not in encoded


def _check_text(proposal_summary: str, terms: object) -> None:
    # OPS-3-01: the summary states the action; terms carry the same values machine-readably.
    if (not isinstance(proposal_summary, str) or not proposal_summary.strip() or len(proposal_summary) > MAX_SUMMARY
            or "\x00" in proposal_summary):
        raise Invalid("invalid_summary", f"summary must be 1 to {MAX_SUMMARY} characters.")
    if terms is not None and not isinstance(terms, dict):
        raise Invalid("invalid_terms", "terms must be an object.")
    if terms is not None and (len(msgspec.json.encode(terms)) > 16384 or not _no_nul(terms)):
        raise Invalid("invalid_terms", "terms must be at most 16 KiB of JSON, without NUL characters.")


def _expiry(kind: Kind, expires_in: int | None, now: datetime) -> datetime:
    seconds = kind.default_expiry_seconds if expires_in is None else expires_in
    if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
        raise Invalid("invalid_expiry", "expires_in must be a positive number of seconds.")
    return now + timedelta(seconds=min(seconds, kind.max_expiry_seconds))


_LOOPBACK_PREFIXES: Final = ("http://127.0.0.1:", "http://127.0.0.1/", "http://localhost:", "http://localhost/")


def _check_url(url: str | None, operation_id: str, *, allow_http_loopback: bool = False) -> str | None:
    if url is None:
        return None
    resolved = url.replace("{operation_id}", operation_id)
    secure = resolved.startswith("https://") or (allow_http_loopback and resolved.startswith(_LOOPBACK_PREFIXES))
    if len(resolved) > MAX_URL or not secure or any(c in resolved for c in " \r\n\t\x00"):
        raise Invalid("invalid_url", "url must be an https:// URL of your site.")
    return resolved


async def propose(conn: asyncpg.Connection, tenant_id: str, owner: CallerView, proposal: Proposal, *,
                  now: datetime, allow_http_loopback: bool = False) -> tuple[Operation, bool]:
    """Propose an operation for ``owner``; nothing is performed (OPS-3-03).

    With an ``action_key``, an open operation of the same owner and key is returned instead
    of a second one (OPS-4-01): the answer's second member says whether it is new.

    ``allow_http_loopback`` (development) accepts an ``http://`` loopback page ``url``.

    Raises:
        NotFound: ``unknown_kind``.
        Invalid: a bad summary, terms, expiry, url, action key or input.
    """
    _check_text(proposal.summary, proposal.terms)
    if proposal.action_key is not None and (not 0 < len(proposal.action_key) <= MAX_ACTION_KEY
                                            or "\x00" in proposal.action_key):
        raise Invalid("invalid_action_key", f"action_key must be 1 to {MAX_ACTION_KEY} characters.")
    if proposal.input is not None and (len(msgspec.json.encode(proposal.input)) > 32768
                                       or not _no_nul(proposal.input)):
        raise Invalid("invalid_input", "input must be at most 32 KiB of JSON, without NUL characters.")
    kind = await get_kind(conn, tenant_id, proposal.kind) if is_kind_name(proposal.kind) else None
    if kind is None:
        raise NotFound("unknown_kind", "No such operation kind: configure it in the console first.")
    expires_at = _expiry(kind, proposal.expires_in, now)
    operation_id = new_id("op")
    url = _check_url(proposal.url, operation_id, allow_http_loopback=allow_http_loopback)
    if proposal.action_key is not None:
        existing = await _open_by_action(conn, tenant_id, owner, proposal.action_key)
        if existing is not None and is_lapsed(existing.view(), now):
            await expire(conn, tenant_id, existing.id, now=now)  # a lapsed proposal is no longer open
        elif existing is not None:
            return existing, False
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO operations (id, tenant_id, kind, client_id, user_id, account_id, session_id, state,"
                " revision, action_key, scopes, input, url, expires_at, created_at, updated_at)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, 'proposed', 1, $8, $9, $10, $11, $12, $13, $13)",
                operation_id, tenant_id, kind.name, owner.client_id, owner.user_id, owner.account, owner.session_id,
                proposal.action_key, kind.scopes, proposal.input, url, expires_at, now)
            await conn.execute(
                "INSERT INTO operation_revisions (operation_id, tenant_id, revision, summary, terms,"
                " user_approval_required, expires_at, created_at) VALUES ($1, $2, 1, $3, $4, $5, $6, $7)",
                operation_id, tenant_id, proposal.summary, proposal.terms, proposal.user_approval_required,
                expires_at, now)
            op = await _must(conn, tenant_id, operation_id)
            await events.emit(conn, tenant_id, "operation.proposed", event_data(op), now=now)
    except asyncpg.UniqueViolationError:
        # A concurrent proposal of the same action won the race: it is the operation.
        assert proposal.action_key is not None
        existing = await _open_by_action(conn, tenant_id, owner, proposal.action_key)
        if existing is None:
            raise
        return existing, False
    return op, True


async def _open_by_action(conn: asyncpg.Connection, tenant_id: str, owner: CallerView,
                          action_key: str) -> Operation | None:
    row = await conn.fetchrow(
        f"SELECT {_OP_COLS}{_FROM} WHERE o.tenant_id = $1 AND o.client_id = $2 AND o.user_id = $3"
        " AND coalesce(o.account_id, '') = $4 AND o.action_key = $5 AND o.state IN ('proposed', 'in_progress')",
        tenant_id, owner.client_id, owner.user_id, owner.account or "", action_key)
    return _op(row) if row else None


async def _must(conn: asyncpg.Connection, tenant_id: str, operation_id: str) -> Operation:
    op = await get_operation(conn, tenant_id, operation_id)
    if op is None:  # pragma: no cover - read in the transaction that wrote it
        raise NotFound("operation_not_found", "No such operation.")
    return op


async def revise(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, summary: str,
                 terms: dict[str, Any] | None, user_approval_required: bool | None = None,
                 expires_in: int | None = None, now: datetime) -> Operation:
    """Issue the next revision of a proposal; earlier ones stay as they were (OPS-3.1-01).

    Raises:
        NotFound: no such operation.
        Conflict: ``not_proposed`` once it has been confirmed, cancelled or has expired.
    """
    _check_text(summary, terms)
    if not is_operation_id(operation_id):
        raise NotFound("operation_not_found", "No such operation.")
    async with conn.transaction():
        # Locked first: the next revision's defaults come from the current one, and two revisions
        # at once must not both copy the same "current".
        await conn.execute("SELECT 1 FROM operations WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
                           tenant_id, operation_id)
        current = await get_operation(conn, tenant_id, operation_id)
        if current is None:
            raise NotFound("operation_not_found", "No such operation.")
        kind = await get_kind(conn, tenant_id, current.kind)
        assert kind is not None  # a kind in use cannot be deleted
        expires_at = current.expires_at if expires_in is None else _expiry(kind, expires_in, now)
        approval = current.user_approval_required if user_approval_required is None else user_approval_required
        revision = await conn.fetchval(
            "UPDATE operations SET revision = revision + 1, expires_at = $3, sequence = sequence + 1, updated_at = $4"
            " WHERE tenant_id = $1 AND id = $2 AND state = 'proposed' AND expires_at > $4 RETURNING revision",
            tenant_id, operation_id, expires_at, now)
        if revision is None:
            raise Conflict("not_proposed", "Only a proposed operation can be revised.")
        await conn.execute(
            "INSERT INTO operation_revisions (operation_id, tenant_id, revision, summary, terms,"
            " user_approval_required, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            operation_id, tenant_id, revision, summary, terms, approval, expires_at, now)
        op = await _must(conn, tenant_id, operation_id)
        await events.emit(conn, tenant_id, "operation.revised", event_data(op), now=now)
    return op


def perform_data(op: Operation, *, simulator: bool = False) -> dict[str, Any]:
    """The perform webhook's ``data``: what to do, for whom, and the idempotency key.

    ``simulator``: the operation is the dashboard's agent simulator's test (`_simulator_test`);
    ``data`` then says ``"simulator": true`` first thing, where a handler looks before acting.
    """
    data: dict[str, Any] = {"simulator": True} if simulator else {}
    data.update({"idempotency_key": op.id, "operation": to_wire(op), "kind": op.kind, "account": op.account_id,
                 "client_id": op.client_id, "user_id": op.user_id, "input": op.input})
    return data


async def _simulator_test(conn: asyncpg.Connection, tenant_id: str, op: Operation) -> bool:
    """Whether ``op`` is the agent simulator's test operation: proposed by Frontdoor's simulator with
    ``"simulator": true`` in its input, for a Session of the tenant's simulator client_id.

    The input alone is the proposer's to write (a company's own input may say ``simulator``), and
    only Frontdoor registers the simulator's client_ids (``simulator_client_ids``); the lookup runs
    only for an input that says so, so an ordinary confirm pays nothing for it.
    """
    if not (isinstance(op.input, dict) and op.input.get("simulator") is True):
        return False
    return bool(await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM simulator_client_ids WHERE tenant_id = $1 AND client_id = $2)",
        tenant_id, op.client_id))


async def confirm(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, revision: int,
                  approved_by: Literal["user", "standing_permission"], via: Literal["agent", "website"],
                  now: datetime, account: str | None = None) -> tuple[Operation, str | None]:
    """The compare-and-set of a confirm: ``proposed`` at ``revision`` → ``in_progress``.

    ``account`` is the confirming Session's account: a proposal made signed out becomes that
    account's operation as it is confirmed (the scopes that allowed the confirm are that
    account's, and the perform webhook names it). The winner's transaction also inserts the
    perform webhook message (to the kind's endpoint, its ``webhook-id`` fixed for every
    retry) and the ``operation.confirmed`` events. Answers the operation as it now is and the
    perform message's ID when this call won, else ``None`` (another confirm won, or it
    changed meanwhile).
    """
    op, message_id, _ = await _confirm(conn, tenant_id, operation_id, revision=revision, approved_by=approved_by,
                                       via=via, now=now, account=account, lease=None)
    return op, message_id


async def confirm_claimed(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, revision: int,
                          approved_by: Literal["user", "standing_permission"], via: Literal["agent", "website"],
                          now: datetime, lease: timedelta,
                          account: str | None = None) -> tuple[Operation, str | None, PreClaimed | None]:
    """`confirm`, its perform message written already claimed by the caller for ``lease`` (`enqueue_claimed`).

    For the ledger's fast path, which attempts the perform webhook as soon as this commits:
    the third element is that claim (with the endpoint's secret rows) for
    `perform.perform_message` (``claimed``, ``claimed_secrets``); None when this call did not
    win, or the endpoint was disabled meanwhile (the message is then parked, as `confirm`
    writes it). The caller must attempt a claim it gets: until the lease ends no deliverer
    takes the message.
    """
    return await _confirm(conn, tenant_id, operation_id, revision=revision, approved_by=approved_by, via=via,
                          now=now, account=account, lease=lease)


async def _confirm(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, revision: int,
                   approved_by: Literal["user", "standing_permission"], via: Literal["agent", "website"],
                   now: datetime, account: str | None,
                   lease: timedelta | None) -> tuple[Operation, str | None, PreClaimed | None]:
    claimed: PreClaimed | None = None
    try:
        async with conn.transaction():
            # One statement: the compare-and-set answers the operation as it leaves it, with its
            # revision and the kind's perform endpoint (a kind with operations is never deleted).
            # The perform message's ID is made here and written by the compare-and-set itself,
            # so the message row inserted next needs no second UPDATE of the operation. The
            # winner also takes the perform endpoint's parking lock (shared) here, after the
            # operation's row lock as before, and before the message is written by the next
            # statement (whose snapshot then sees an enable that committed meanwhile: `parking`).
            message_id = new_id("msg")
            won = await conn.fetchrow(
                "WITH o AS (UPDATE operations SET state = 'in_progress', confirmed_revision = revision,"  # noqa: S608
                " approved_by = $4, confirmed_at = $5, confirmed_via = $6, account_id = coalesce(account_id, $7),"
                " perform_message_id = $8, sequence = sequence + 1, updated_at = $5"
                " WHERE tenant_id = $1 AND id = $2 AND state = 'proposed' AND revision = $3 AND expires_at > $5"
                " AND (account_id IS NULL OR $7::text IS NULL OR account_id = $7) RETURNING *)"
                f" SELECT {_OP_COLS}, k.perform_endpoint_id AS kind_perform_endpoint_id,"
                f" {HOLD_ENDPOINT_SQL.format(endpoint='k.perform_endpoint_id')} AS endpoint_held,"
                f" {SUBSCRIBERS_SQL.format(tenant='o.tenant_id', event=_CONFIRMED_EVENT)} AS subscribers FROM o"
                " JOIN operation_revisions r ON r.operation_id = o.id AND r.revision = o.revision"
                " JOIN operation_kinds k ON k.tenant_id = o.tenant_id AND k.name = o.kind",
                tenant_id, operation_id, revision, approved_by, now, via, account, message_id)
            if won is None:
                return await _must(conn, tenant_id, operation_id), None, None
            fields = dict(won)
            endpoint_id = fields.pop("kind_perform_endpoint_id")
            fields.pop("endpoint_held")  # NULL (no lock) only without an endpoint, which the insert refuses
            subscribers = fields.pop("subscribers")  # of operation.confirmed, read by the same statement
            op = msgspec.convert(fields, Operation)
            data = perform_data(op, simulator=await _simulator_test(conn, tenant_id, op))
            if lease is not None and endpoint_id is not None:  # the parking lock is held: written claimed
                claimed = await events.perform_claimed(conn, tenant_id, endpoint_id, data, operation_id=op.id,
                                                       now=now, message_id=message_id, lease=lease)
            else:
                await events.perform(conn, tenant_id, endpoint_id, data, operation_id=op.id, now=now,
                                     message_id=message_id, endpoint_held=endpoint_id is not None)
            await events.emit(conn, tenant_id, "operation.confirmed", event_data(op), now=now,
                              subscribers=subscribers)
    except asyncpg.UniqueViolationError:
        # Bound to the account, it would duplicate that account's open operation for the same
        # action: not confirmed; the agent is answered the operation as it is.
        return await _must(conn, tenant_id, operation_id), None, None
    return op, message_id, claimed


async def _stop_performing(conn: asyncpg.Connection, tenant_id: str, message_id: str, now: datetime) -> None:
    """In the transaction that makes the operation final: its perform message is never sent again.

    A pending retry would call the company's perform webhook after the outcome is known, and a
    redelivery or recovery would perform it twice (OPS-6-02, OPS-6-03): delivered or not, the
    message is superseded, atomically with the final state.
    """
    await supersede_message(conn, tenant_id, message_id, now=now)


# The UPDATE answers the operation as it leaves it, with its revision, and stops its perform
# message (locked before it, by the caller or by `_finish`) in the same statement, as
# `_stop_performing` does. ``$7``: the perform message the caller holds locked, if any.
_STATE_EVENT = "'operation.' || o.state"  # the event type of the state an UPDATE's row ``o`` left
_FINISH = (
    "WITH o AS (UPDATE operations SET state = $3, result = $5, finished_at = $6, sequence = sequence + 1,"  # noqa: S608
    " updated_at = $6, attention = NULL WHERE tenant_id = $1 AND id = $2 AND state = $4"
    " AND ($7::text IS NULL OR perform_message_id = $7) RETURNING *),"
    f" s AS (UPDATE webhook_messages AS m SET {SUPERSEDE_SET.format(now='$6')} FROM o"
    " WHERE m.tenant_id = o.tenant_id AND m.id = o.perform_message_id)"
    f" SELECT {_OP_COLS}, {SUBSCRIBERS_SQL.format(tenant='o.tenant_id', event=_STATE_EVENT)}"
    " AS subscribers FROM o JOIN operation_revisions r ON r.operation_id = o.id AND r.revision = o.revision"
)


async def _finish(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, state: str, from_state: str,
                  result: dict[str, Any], now: datetime, held_message: str | None = None) -> Operation | None:
    async with conn.transaction():
        row = None
        if held_message is not None:
            # The caller's transaction already holds this message's row lock (the settle of its
            # perform attempt): the lock order below holds without locking it again, provided it
            # is the operation's perform message, which the UPDATE checks (else the path below).
            row = await conn.fetchrow(_FINISH, tenant_id, operation_id, state, from_state, result, now, held_message)
        if row is None:
            # Lock order: the perform message, then the operation, as settling the perform's answer
            # takes them (`perform_message` records the outcome in the settle's transaction), or an
            # answer and a reported outcome arriving together deadlock. The message ID, set once at
            # confirm in the transaction that leaves `proposed`, is read without locking the
            # operation, and its message is locked by the same statement (`lock_message`'s lock).
            await conn.execute(
                "SELECT 1 FROM webhook_messages AS m WHERE m.tenant_id = $1 AND m.id = (SELECT o.perform_message_id"
                " FROM operations AS o WHERE o.tenant_id = $1 AND o.id = $2) FOR UPDATE OF m",
                tenant_id, operation_id)
            row = await conn.fetchrow(_FINISH, tenant_id, operation_id, state, from_state, result, now, None)
        if row is None:
            return None
        fields = dict(row)
        subscribers = fields.pop("subscribers")  # of operation.<state>, read by the same statement
        op = msgspec.convert(fields, Operation)
        await events.emit(conn, tenant_id, f"operation.{state}", event_data(op), now=now, subscribers=subscribers)
    return op


async def cancel(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, now: datetime) -> Operation | None:
    """``proposed`` → ``cancelled`` with a result saying nothing was done; ``None`` if it was not proposed."""
    return await _finish(conn, tenant_id, operation_id, state="cancelled", from_state="proposed",
                         result=cancelled_result(), now=now)


async def expire(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, now: datetime) -> Operation | None:
    """A lapsed proposal → ``expired`` (lazily on touch, or by the sweep)."""
    async with conn.transaction():
        changed = await conn.fetchval(
            "UPDATE operations SET state = 'expired', result = $3, finished_at = $4, sequence = sequence + 1,"
            " updated_at = $4 WHERE tenant_id = $1 AND id = $2 AND state = 'proposed' AND expires_at <= $4"
            " RETURNING coalesce(perform_message_id, '')", tenant_id, operation_id, expired_result(), now)
        if changed is None:
            return None
        if changed:  # a proposal has no perform message; should one ever have, it is stopped too
            await _stop_performing(conn, tenant_id, changed, now)
        op = await _must(conn, tenant_id, operation_id)
        await events.emit(conn, tenant_id, "operation.expired", event_data(op), now=now)
    return op


async def expire_due(conn: asyncpg.Connection, *, now: datetime, limit: int = 500) -> int:
    """The sweep: expire up to ``limit`` lapsed proposals of every tenant; answers how many."""
    rows = await conn.fetch("SELECT tenant_id, id FROM operations WHERE state = 'proposed' AND expires_at <= $1"
                            " ORDER BY expires_at LIMIT $2", now, limit)
    done = 0
    for row in rows:
        if await expire(conn, row["tenant_id"], row["id"], now=now) is not None:
            done += 1
    return done


async def record_outcome(conn: asyncpg.Connection, tenant_id: str, operation_id: str, *, outcome: object,
                         result: object, now: datetime, held_message: str | None = None) -> tuple[Operation, bool]:
    """The company's outcome: ``in_progress`` → ``succeeded`` | ``failed`` with its result.

    ``held_message``: a message whose row lock the caller's transaction already holds (the
    settle of a perform attempt, `perform.perform_message`); when it is the operation's perform
    message, it is not locked again (one statement fewer).

    Reporting the outcome an operation already has is accepted (``changed`` is False);
    a different one is ``Conflict("outcome_conflict")``: an outcome, once known, is final.

    Raises:
        Invalid: a malformed outcome or result (OPS-6-05).
        NotFound: no such operation.
        Conflict: ``not_in_progress`` (never confirmed, or cancelled/expired) or ``outcome_conflict``.
    """
    try:
        state, clean = validate_result(outcome, result)
    except ValueError as exc:
        raise Invalid("invalid_outcome", str(exc)) from None
    if not is_operation_id(operation_id):
        raise NotFound("operation_not_found", "No such operation.")
    op = await _finish(conn, tenant_id, operation_id, state=state, from_state="in_progress", result=clean, now=now,
                       held_message=held_message)
    if op is not None:
        return op, True
    current = await get_operation(conn, tenant_id, operation_id)
    if current is None:
        raise NotFound("operation_not_found", "No such operation.")
    if current.state == state:
        return current, False
    if current.state in ("succeeded", "failed"):
        raise Conflict("outcome_conflict", "This operation already has a different outcome.")
    raise Conflict("not_in_progress", "Only an operation in progress can have an outcome.")


async def flag_attention(conn: asyncpg.Connection, tenant_id: str, operation_id: str, reason: str, *,
                         now: datetime) -> None:
    """Mark an operation still ``in_progress`` for the admins (e.g. ``delivery_exhausted``)."""
    if not is_operation_id(operation_id):
        return
    await conn.execute("UPDATE operations SET attention = $3, updated_at = $4, sequence = sequence + 1"
                       " WHERE tenant_id = $1 AND id = $2 AND state = 'in_progress' AND attention IS DISTINCT FROM $3",
                       tenant_id, operation_id, reason, now)


async def clear_attention(conn: asyncpg.Connection, tenant_id: str, operation_id: str, reasons: Collection[str], *,
                          now: datetime) -> None:
    """Lift an in-progress operation's flag when it is one of ``reasons`` (a later answer resolved it)."""
    if not is_operation_id(operation_id):
        return
    await conn.execute("UPDATE operations SET attention = NULL, updated_at = $4, sequence = sequence + 1"
                       " WHERE tenant_id = $1 AND id = $2 AND state = 'in_progress' AND attention = ANY($3::text[])",
                       tenant_id, operation_id, sorted(reasons), now)


async def list_operations(conn: asyncpg.Connection, tenant_id: str, filters: ListFilters, *, limit: int = 50,
                          before: tuple[datetime, str] | None = None) -> list[Operation]:
    """The tenant's operations, newest first, filtered; ``before`` is the keyset cursor."""
    clauses = ["o.tenant_id = $1"]
    args: list[Any] = [tenant_id]

    def add(sql: str, value: Any) -> None:
        args.append(value)
        clauses.append(sql.replace("?", f"${len(args)}"))

    if filters.state is not None:
        add("o.state = ?", filters.state)
    if filters.kind is not None:
        add("o.kind = ?", filters.kind)
    if filters.account is not None:
        add("o.account_id = ?", filters.account)
    if filters.client_id is not None:
        add("o.client_id = ?", filters.client_id)
    if filters.since is not None:
        add("o.created_at >= ?", filters.since)
    if filters.until is not None:
        add("o.created_at < ?", filters.until)
    if filters.attention:
        clauses.append("o.attention IS NOT NULL")
    if before is not None:
        args.extend(before)
        clauses.append(f"(o.created_at, o.id) < (${len(args) - 1}, ${len(args)})")
    args.append(limit)
    rows = await conn.fetch(
        f"SELECT {_OP_COLS}{_FROM} WHERE {' AND '.join(clauses)}"
        f" ORDER BY o.created_at DESC, o.id DESC LIMIT ${len(args)}", *args)
    return [_op(r) for r in rows]
