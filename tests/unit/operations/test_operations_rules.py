"""The Operations extension's rules, one requirement at a time, with an injected time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from frontdoor_operations.perform import ANSWER_PROBLEMS, interpret_answer
from frontdoor_operations.rules import (
    CallerView,
    OperationView,
    cancel_decision,
    check_owner,
    confirm_decision,
    is_lapsed,
    validate_result,
)
from frontdoor_webhooks.sender import RESPONSE_LIMIT

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
AGENT = "https://agent.example/client.json"


def op(**over: Any) -> OperationView:
    values: dict[str, Any] = {"state": "proposed", "revision": 2, "client_id": AGENT, "user_id": "u1",
                              "account": "acct_1", "expires_at": NOW + timedelta(minutes=5),
                              "user_approval_required": True, "scopes": ("orders:write",)}
    values.update(over)
    return OperationView(**values)


def caller(**over: Any) -> CallerView:
    values: dict[str, Any] = {"client_id": AGENT, "user_id": "u1", "session_id": "ses_1", "account": "acct_1",
                              "scopes": frozenset({"orders:write", "orders:read"})}
    values.update(over)
    return CallerView(**values)


def test_ops_3_2_01_owner_reads_its_operation() -> None:
    assert check_owner(op(), caller()) is None


@pytest.mark.parametrize("who", [caller(user_id="u2"), caller(client_id="https://other.example/c.json"),
                                 caller(account="acct_2")])
def test_ops_3_2_01_a_stranger_sees_not_found(who: CallerView) -> None:
    assert check_owner(op(), who) == check_owner(None, who)
    error = check_owner(op(), who)
    assert error is not None and error.code.value == "operation_not_found"


def test_an_accounts_operation_signed_out_is_sign_in_required() -> None:
    error = check_owner(op(), caller(account=None, scopes=frozenset()))
    assert error is not None and error.code.value == "sign_in_required"


def test_a_signed_out_operation_is_readable_signed_in_or_out() -> None:
    assert check_owner(op(account=None), caller(account=None)) is None
    assert check_owner(op(account=None), caller()) is None


def test_confirm_of_the_latest_revision_goes_ahead() -> None:
    assert confirm_decision(op(), caller(), revision=2, approved_by="user", now=NOW).action == "confirm"


def test_ops_3_1_01_an_older_revision_is_terms_changed() -> None:
    d = confirm_decision(op(), caller(), revision=1, approved_by="user", now=NOW)
    assert d.action == "refuse" and d.error is not None and d.error.code.value == "terms_changed"


def test_ops_5_1_05_standing_permission_needs_a_revision_without_user_approval() -> None:
    refused = confirm_decision(op(), caller(), revision=2, approved_by="standing_permission", now=NOW)
    assert refused.error is not None and refused.error.code.value == "user_approval_required"
    allowed = confirm_decision(op(user_approval_required=False), caller(), revision=2,
                               approved_by="standing_permission", now=NOW)
    assert allowed.action == "confirm"


def test_scopes_are_needed_and_named() -> None:
    d = confirm_decision(op(), caller(scopes=frozenset({"orders:read"})), revision=2, approved_by="user", now=NOW)
    assert d.error is not None and d.error.code.value == "insufficient_scope" and d.error.scope == "orders:write"
    out = confirm_decision(op(account=None), caller(account=None, scopes=frozenset()), revision=2,
                           approved_by="user", now=NOW)
    assert out.error is not None and out.error.code.value == "sign_in_required"


@pytest.mark.parametrize("state", ["in_progress", "succeeded", "failed", "cancelled", "expired"])
def test_ops_6_02_a_confirm_of_a_non_proposed_operation_changes_nothing(state: str) -> None:
    # Even with an old revision or a bad approval: the record comes back as it is.
    d = confirm_decision(op(state=state), caller(), revision=1, approved_by="nonsense", now=NOW)
    assert d.action == "unchanged"


def test_a_lapsed_proposal_expires_on_touch() -> None:
    lapsed = op(expires_at=NOW)
    assert is_lapsed(lapsed, NOW) and not is_lapsed(lapsed, NOW - timedelta(seconds=1))
    assert confirm_decision(lapsed, caller(), revision=2, approved_by="user", now=NOW).action == "expire"
    assert cancel_decision(lapsed, NOW).action == "expire"


@pytest.mark.parametrize(("revision", "approved_by"), [("2", "user"), (True, "user"), (0, "user"), (2, None),
                                                      (2, "agent")])
def test_a_malformed_confirm_is_invalid_request(revision: object, approved_by: object) -> None:
    d = confirm_decision(op(), caller(), revision=revision, approved_by=approved_by, now=NOW)
    assert d.error is not None and d.error.code.value == "invalid_request"


def test_cancel_a_proposal_but_never_an_operation_in_progress() -> None:
    assert cancel_decision(op(), NOW).action == "cancel"
    for state in ("in_progress", "succeeded", "failed", "cancelled", "expired"):
        assert cancel_decision(op(state=state), NOW).action == "unchanged"


def test_ops_6_05_an_outcome_needs_a_summary() -> None:
    assert validate_result("failed", {"summary": "Charged 5 EUR, shipped nothing"}) == (
        "failed", {"summary": "Charged 5 EUR, shipped nothing"})
    for outcome, result in [("done", {"summary": "x"}), ("failed", {}), ("failed", {"summary": " "}),
                            ("succeeded", {"summary": "x", "data": [1]}), ("succeeded", "x")]:
        with pytest.raises(ValueError):
            validate_result(outcome, result)


@pytest.mark.parametrize(("status", "body", "kind"), [
    (200, {"outcome": "succeeded", "result": {"summary": "Order 4 placed"}}, "outcome"),
    (201, {"outcome": "failed", "result": {"summary": "Nothing was charged"}}, "outcome"),
    (202, None, "accepted"),
    (202, {"queued": True}, "accepted"),
    # OPS-6-03: nothing known means unknown, never failed.
    (200, None, "unknown"),
    (200, {"outcome": "failed"}, "unknown"),
    (200, {"outcome": "maybe", "result": {"summary": "?"}}, "unknown"),
    (500, {"outcome": "failed", "result": {"summary": "x"}}, "unknown"),
    (None, None, "unknown"),
    (410, None, "unknown"),
])
def test_ops_6_03_what_a_perform_answer_means(status: int | None, body: Any, kind: str) -> None:
    raw = b"" if body is None else msgspec.json.encode(body)
    assert interpret_answer(status, raw).kind == kind


_OUTCOME = {"outcome": "succeeded", "result": {"summary": "Order 4 placed"}}


def _at_size(size: int) -> bytes:
    """A valid outcome answer padded (inside ``result.data``) to exactly ``size`` bytes."""
    base = msgspec.json.encode({**_OUTCOME, "result": {**_OUTCOME["result"], "data": {"pad": ""}}})
    return msgspec.json.encode({**_OUTCOME, "result": {**_OUTCOME["result"], "data": {"pad": "x" * (size - len(base))}}})


@pytest.mark.parametrize(("status", "body", "truncated", "problem"), [
    (200, b"ok", False, "answer_not_json"),
    (200, msgspec.json.encode(_OUTCOME)[:-7], False, "answer_not_json"),  # truncated JSON
    (200, b"", False, "answer_without_outcome"),
    (204, b"", False, "answer_without_outcome"),
    (200, b'{"queued": true}', False, "answer_without_outcome"),
    (200, b"[1, 2]", False, "answer_without_outcome"),
    (200, b'{"outcome": 1, "result": {"summary": "x"}}', False, "answer_invalid_outcome"),  # wrong types
    (200, b'{"outcome": "succeeded", "result": "done"}', False, "answer_invalid_outcome"),
    (200, b'{"outcome": "succeeded", "result": {"summary": 5}}', False, "answer_invalid_outcome"),
    (200, b'{"outcome": "failed", "result": {"summary": "x", "data": [1]}}', False, "answer_invalid_outcome"),
    (202, b'{"outcome": ["succeeded"], "result": {}}', False, "answer_invalid_outcome"),
    # What was cut might have been an outcome: never read, whatever is left.
    (200, _at_size(RESPONSE_LIMIT), True, "answer_truncated"),
    (202, b"", True, "answer_truncated"),
    (200, _at_size(RESPONSE_LIMIT + 1), False, "answer_truncated"),
])
def test_an_unreadable_2xx_is_unknown_and_says_why(status: int, body: bytes, truncated: bool, problem: str) -> None:
    """OPS-6-03: a 2xx that cannot be read as an outcome is unknown (never failed), with a reason to flag."""
    answer = interpret_answer(status, body, truncated=truncated)
    assert answer.kind == "unknown" and answer.problem == problem and answer.outcome is None
    assert problem in ANSWER_PROBLEMS


def test_an_outcome_exactly_at_the_size_cap_is_read() -> None:
    body = _at_size(RESPONSE_LIMIT)
    assert len(body) == RESPONSE_LIMIT
    answer = interpret_answer(200, body)
    assert answer.kind == "outcome" and answer.outcome == "succeeded" and answer.problem is None


def test_a_202_reads_its_body_only_for_an_outcome() -> None:
    assert interpret_answer(202, b"Accepted").kind == "accepted"
    assert interpret_answer(202, b'{"outcome": "failed", "result": {"summary": "Nothing charged"}}').outcome == "failed"
    assert interpret_answer(503, b"", truncated=True).problem is None  # not a 2xx: plainly unknown
