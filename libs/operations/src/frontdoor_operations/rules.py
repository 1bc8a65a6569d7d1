"""The Operations extension's rules as pure functions: no I/O, the time passed in.

Each function decides one request against one operation as stored; the ledger
(:mod:`frontdoor_operations.ledger`) loads the rows, calls these, and applies the decision
with a compare-and-set in PostgreSQL. Requirement IDs are the PAP ledger's ``OPS-*``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any, Final, Literal

import msgspec
from frontdoor_protocol.errors import ErrorCode, ProtocolError
from frontdoor_protocol.scopes import format_scope

__all__ = [
    "FINAL_STATES",
    "OPEN_STATES",
    "CallerView",
    "CancelDecision",
    "ConfirmDecision",
    "OperationView",
    "cancel_decision",
    "check_owner",
    "confirm_decision",
    "expired_result",
    "cancelled_result",
    "is_lapsed",
    "validate_result",
]

OperationState = Literal["proposed", "in_progress", "succeeded", "failed", "cancelled", "expired"]
ApprovedBy = Literal["user", "standing_permission"]

FINAL_STATES: Final = frozenset({"succeeded", "failed", "cancelled", "expired"})
OPEN_STATES: Final = frozenset({"proposed", "in_progress"})
MAX_RESULT_SUMMARY: Final = 2000


class CallerView(msgspec.Struct, frozen=True, kw_only=True):
    """Who asks: the verified Session's agent, user, and its sign-in now."""

    client_id: str
    user_id: str
    session_id: str
    account: str | None
    scopes: frozenset[str] = frozenset()

    @property
    def signed_in(self) -> bool:
        return self.account is not None


class OperationView(msgspec.Struct, frozen=True, kw_only=True):
    """What the rules read of an operation and its latest revision."""

    state: OperationState
    revision: int
    client_id: str
    user_id: str
    account: str | None
    expires_at: datetime
    user_approval_required: bool
    scopes: tuple[str, ...] = ()


def is_lapsed(op: OperationView, now: datetime) -> bool:
    """A proposal whose time ran out: it becomes ``expired`` when next touched (OPS-3.2-01)."""
    return op.state == "proposed" and now >= op.expires_at


def check_owner(op: OperationView | None, caller: CallerView) -> ProtocolError | None:
    """Ownership: another user's operation and an unknown one are the same ``404``.

    An account's operation is readable only in a Session signed in to that account: a
    signed-out Session of the same agent and user gets ``sign_in_required`` (403), one signed
    in to another account gets ``operation_not_found`` like a stranger.
    """
    if op is None or op.client_id != caller.client_id or op.user_id != caller.user_id:
        return ProtocolError(ErrorCode.OPERATION_NOT_FOUND, "No such operation.")
    if op.account is not None:
        if caller.account is None:
            return ProtocolError(ErrorCode.SIGN_IN_REQUIRED, "This operation belongs to an account: sign in.")
        if caller.account != op.account:
            return ProtocolError(ErrorCode.OPERATION_NOT_FOUND, "No such operation.")
    return None


class ConfirmDecision(msgspec.Struct, frozen=True, kw_only=True):
    """What a confirm request leads to.

    ``action`` is ``confirm`` (apply the compare-and-set), ``unchanged`` (answer the operation
    as it is, 200: a repeated or late confirm, OPS-6-02), ``expire`` (it lapsed: expire it,
    then answer it unchanged), or ``refuse`` with ``error`` (and the current operation for
    ``terms_changed``).
    """

    action: Literal["confirm", "unchanged", "expire", "refuse"]
    error: ProtocolError | None = None


def confirm_decision(op: OperationView, caller: CallerView, *, revision: object, approved_by: object,
                     now: datetime) -> ConfirmDecision:
    """Decide a confirm of ``revision`` by ``caller`` (already known to own ``op``).

    Order: a lapsed proposal expires; anything not ``proposed`` comes back unchanged
    (confirming twice changes nothing, OPS-6-02); a malformed body is ``invalid_request``;
    an older revision is ``terms_changed`` (OPS-3.1-01); a standing permission on a
    revision needing the user's own approval is ``user_approval_required`` (OPS-5.1-05);
    missing scopes are ``insufficient_scope`` (or ``sign_in_required`` signed out).
    """
    if is_lapsed(op, now):
        return ConfirmDecision(action="expire")
    if op.state != "proposed":
        return ConfirmDecision(action="unchanged")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        return ConfirmDecision(action="refuse", error=ProtocolError(
            ErrorCode.INVALID_REQUEST, "revision must be a positive integer."))
    if approved_by not in ("user", "standing_permission"):
        return ConfirmDecision(action="refuse", error=ProtocolError(
            ErrorCode.INVALID_REQUEST, "approved_by must be user or standing_permission."))
    if revision != op.revision:
        return ConfirmDecision(action="refuse", error=ProtocolError(
            ErrorCode.TERMS_CHANGED, "The terms changed: confirm the current revision."))
    if approved_by == "standing_permission" and op.user_approval_required:
        return ConfirmDecision(action="refuse", error=ProtocolError(
            ErrorCode.USER_APPROVAL_REQUIRED, "This revision needs the user's own approval."))
    error = _scope_error(op.scopes, caller)
    if error is not None:
        return ConfirmDecision(action="refuse", error=error)
    return ConfirmDecision(action="confirm")


def _scope_error(needed: Collection[str], caller: CallerView) -> ProtocolError | None:
    wanted = tuple(dict.fromkeys(needed))
    if not wanted:
        return None
    scope = format_scope(wanted)
    if not caller.signed_in:
        return ProtocolError(ErrorCode.SIGN_IN_REQUIRED, "Confirming this needs a signed-in Session.", scope=scope)
    if not caller.scopes.issuperset(wanted):
        return ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, "Confirming this needs a scope the Session lacks.",
                             scope=scope)
    return None


class CancelDecision(msgspec.Struct, frozen=True, kw_only=True):
    """``cancel`` a proposal, ``expire`` a lapsed one, or leave it ``unchanged``.

    An operation in progress is left as it is until its outcome is known: Frontdoor
    cannot undo what the company may already be doing.
    """

    action: Literal["cancel", "expire", "unchanged"]


def cancel_decision(op: OperationView, now: datetime) -> CancelDecision:
    """Decide a cancel by the operation's owner."""
    if is_lapsed(op, now):
        return CancelDecision(action="expire")
    if op.state == "proposed":
        return CancelDecision(action="cancel")
    return CancelDecision(action="unchanged")


def cancelled_result() -> dict[str, Any]:
    """The result of a proposal cancelled before confirmation: nothing was done (OPS-6-05)."""
    return {"summary": "Cancelled before it was confirmed; nothing was done."}


def expired_result() -> dict[str, Any]:
    """The result of a proposal that lapsed unconfirmed: nothing was done (OPS-6-05)."""
    return {"summary": "The proposal expired before it was confirmed; nothing was done."}


def validate_result(outcome: object, result: object) -> tuple[Literal["succeeded", "failed"], dict[str, Any]]:
    """A company's outcome report, checked: ``succeeded``/``failed`` and a ``result`` with a summary.

    ``result.summary`` must say what changed, partial changes of a failure included
    (OPS-6-05); ``result.data`` is an optional object.

    Raises:
        ValueError: naming what is wrong (never quoting the value).
    """
    if outcome not in ("succeeded", "failed"):
        raise ValueError("outcome must be succeeded or failed")
    if not isinstance(result, Mapping):
        raise ValueError("result must be an object")
    summary = result.get("summary")
    if not isinstance(summary, str) or not summary.strip() or len(summary) > MAX_RESULT_SUMMARY:
        raise ValueError(f"result.summary must be 1 to {MAX_RESULT_SUMMARY} characters")
    data = result.get("data")
    if data is not None and not isinstance(data, Mapping):
        raise ValueError("result.data must be an object")
    if "\x00" in summary or "\\u0000" in msgspec.json.encode(data).decode():
        raise ValueError("result must not contain NUL characters")
    clean: dict[str, Any] = {"summary": summary}
    if data is not None:
        clean["data"] = dict(data)
    return outcome, clean
