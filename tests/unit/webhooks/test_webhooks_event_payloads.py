"""The event catalogue: one documented payload per type, the generated schemas in step,
and the ledger's operation.* data exactly the documented OperationEvent."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from frontdoor_core.errors import Invalid
from frontdoor_operations.ledger import Operation, event_data
from frontdoor_webhooks import EVENT_TYPES, PAYLOADS, PERFORM, TEST_EVENT, message_schema, payload_for
from frontdoor_webhooks.event_types import validate_event_types

ROOT = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 12, 1, 9, 30, 15, 123000, tzinfo=UTC)
# Words that would mean a payload carries a credential.
_FORBIDDEN = ("token", "secret", "password", "code", "assertion", "key")


def test_every_event_type_has_a_payload_and_webhook_test_is_not_subscribable() -> None:
    assert set(PAYLOADS) == {*EVENT_TYPES, TEST_EVENT}
    assert TEST_EVENT not in EVENT_TYPES
    for unsubscribable in (TEST_EVENT, PERFORM):
        with pytest.raises(Invalid):
            validate_event_types([unsubscribable])


def test_the_generated_schemas_are_in_step_with_the_structs() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_webhook_schemas.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _fields(schema: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for definition in schema["$defs"].values():
        names |= set(definition.get("properties", {}))
    return names


@pytest.mark.parametrize("event_type", sorted(PAYLOADS))
def test_each_schema_has_sequence_and_no_credential(event_type: str) -> None:
    schema = message_schema(event_type)
    assert schema["properties"]["type"] == {"enum": [event_type]}
    assert schema["required"] == ["type", "timestamp", "data"]
    data = schema["$defs"][schema["properties"]["data"]["$ref"].rsplit("/", 1)[-1]]
    assert "sequence" in data["required"]
    assert not [f for f in _fields(schema) if any(word in f for word in _FORBIDDEN)]


def _operation(**changes: Any) -> Operation:
    base: dict[str, Any] = {
        "id": "op_01JD00000000000000000000AA", "tenant_id": "ten_x", "kind": "order.place",
        "client_id": "https://agent.example/agent.json", "user_id": "u-1", "account_id": "acct_ada",
        "session_id": "ses_1", "state": "proposed", "revision": 1, "action_key": None, "scopes": ["orders:write"],
        "input": None, "url": None, "expires_at": T0 + timedelta(minutes=10), "confirmed_revision": None,
        "approved_by": None, "confirmed_at": None, "confirmed_via": None, "perform_message_id": None,
        "result": None, "finished_at": None, "attention": None, "sequence": 1, "created_at": T0,
        "updated_at": T0, "summary": "Order 2 mugs for 24.00 EUR", "terms": None, "user_approval_required": True,
    }
    return Operation(**{**base, **changes})


@pytest.mark.parametrize("op", [
    _operation(),
    _operation(account_id=None, terms={"total": "24.00", "currency": "EUR"}, url="https://shop.example/o/1",
               revision=2, sequence=2),
    _operation(state="in_progress", confirmed_revision=2, approved_by="user", confirmed_at=T0, sequence=3),
    _operation(state="succeeded", confirmed_revision=1, approved_by="standing_permission", confirmed_at=T0,
               result={"summary": "Placed.", "data": {"order": "ord_1"}}, sequence=4),
    _operation(state="cancelled", result={"summary": "Cancelled before it was confirmed; nothing was done."},
               sequence=5),
], ids=["proposed", "revised-with-terms-url", "confirmed", "succeeded-with-data", "cancelled"])
def test_operation_event_data_is_exactly_the_documented_payload(op: Operation) -> None:
    data = event_data(op)
    # Round trip through the struct: a missing, extra or retyped field would change it.
    assert payload_for("operation.confirmed", data) == data
    assert msgspec.json.decode(msgspec.json.encode(data)) == data


def test_payload_for_drops_unknown_fields_and_refuses_missing_ones() -> None:
    fields = {"client_id": "https://agent.example/agent.json", "sessions_ended": 2, "sequence": 7, "extra": "x"}
    assert payload_for("agent.blocked", fields) == {"sequence": 7, "client_id": fields["client_id"],
                                                    "sessions_ended": 2}
    with pytest.raises(msgspec.ValidationError):
        payload_for("agent.blocked", {"client_id": "https://agent.example/agent.json", "sequence": 7})
    with pytest.raises(msgspec.ValidationError):
        payload_for("session.signed_out", {"session_id": "ses_1", "sequence": 0, "client_id": "c", "user_id": "u",
                                           "sign_in_id": "sgn_1", "reason": "disconnected"})
