"""The dashboard's pure reading of operations: what a revision changed, and what counts as stuck."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from frontdoor_operations.ledger import Operation, Revision
from frontdoor_operations.overview import STUCK_AFTER, is_stuck, revision_changes, term_paths

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _rev(n: int, summary: str, terms: dict[str, Any] | None, *, approval: bool = True,
         expires: datetime = NOW) -> Revision:
    return Revision(revision=n, summary=summary, terms=terms, user_approval_required=approval, expires_at=expires,
                    created_at=NOW)


def test_term_paths_name_every_leaf() -> None:
    assert term_paths({"total": {"amount": "38.00"}, "items": [{"sku": "a"}, {"sku": "b"}], "tags": [], "x": {}}) == {
        "total.amount": "38.00", "items[0].sku": "a", "items[1].sku": "b", "tags": [], "x": {}}
    assert term_paths("flat") == {"(terms)": "flat"}


def test_revision_changes_list_changed_paths_and_fields() -> None:
    first = _rev(1, "Order 1", {"total": {"amount": "19.00", "currency": "EUR"}, "items": [{"qty": 1}]})
    second = _rev(2, "Order 2", {"total": {"amount": "38.00", "currency": "EUR"}, "items": [{"qty": 2}],
                                 "note": "gift"}, expires=NOW + timedelta(minutes=5))
    third = _rev(3, "Order 2", None, approval=False, expires=NOW + timedelta(minutes=5))
    one, two, three = revision_changes([first, second, third])
    assert one.terms_changed == [] and not one.summary_changed
    assert two.terms_changed == ["items[0].qty", "note", "total.amount"]
    assert two.summary_changed and two.expiry_changed and not two.approval_changed
    assert three.terms_changed == ["items[0].qty", "note", "total.amount", "total.currency"]
    assert three.approval_changed and not three.summary_changed and not three.expiry_changed


def _op(state: str, *, confirmed_at: datetime | None, attention: str | None = None) -> Operation:
    return Operation(id="op_1", tenant_id="ten_1", kind="k", client_id="c", user_id="u", account_id=None,
                     session_id="ses_1", state=state, revision=1, action_key=None, scopes=[], input=None,  # type: ignore[arg-type]
                     url=None, expires_at=NOW, confirmed_revision=1 if confirmed_at else None,
                     approved_by="user" if confirmed_at else None, confirmed_at=confirmed_at,
                     confirmed_via="agent" if confirmed_at else None, perform_message_id=None, result=None,
                     finished_at=None, attention=attention, sequence=1, created_at=NOW, updated_at=NOW,
                     summary="s", terms=None, user_approval_required=True)


def test_stuck_means_in_progress_and_flagged_or_old() -> None:
    assert not is_stuck(_op("in_progress", confirmed_at=NOW - STUCK_AFTER + timedelta(seconds=1)), NOW)
    assert is_stuck(_op("in_progress", confirmed_at=NOW - STUCK_AFTER), NOW)
    assert is_stuck(_op("in_progress", confirmed_at=NOW, attention="delivery_exhausted"), NOW)
    assert not is_stuck(_op("succeeded", confirmed_at=NOW - timedelta(hours=1)), NOW)
    assert not is_stuck(_op("proposed", confirmed_at=None), NOW)
