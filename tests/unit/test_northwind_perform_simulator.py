"""Northwind's perform webhook and the dashboard's agent simulator (issue #19 §1).

The simulator's test operation says ``"simulator": true`` in its terms and input and has no
order lines (`frontdoor_console.simulator.operation`): Northwind answers it ``succeeded``
without placing an order, once per idempotency key like any perform; a real order with the
same flag is still placed as an order, and terms without lines and without the flag still fail.
"""

from __future__ import annotations

from typing import Any

from northwind.perform import Performer


def _delivery(key: str, terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "idempotency_key": key,
        "kind": "order.place",
        "account": "acct_ada",
        "operation": {"operation_id": f"op_{key}", "revision": 1, "terms": terms},
    }


def test_the_simulators_test_operation_succeeds_and_orders_nothing() -> None:
    performer = Performer()
    status, body = performer.perform(_delivery("k1", {"simulator": True}))
    assert status == 200 and body["outcome"] == "succeeded"
    assert body["result"]["summary"] == "Frontdoor agent simulator test: nothing was ordered or charged."
    assert "data" not in body["result"]
    assert performer.orders == {}
    assert performer.perform(_delivery("k1", {"simulator": True})) == (status, body)  # a retry: the same answer
    assert performer.performed("op_k1") == 1


def test_without_the_flag_terms_with_no_order_still_fail() -> None:
    status, body = Performer().perform(_delivery("k2", {"simulator": "yes"}))
    assert status == 200 and body["outcome"] == "failed"
    assert body["result"]["summary"].startswith("Nothing was ordered or charged")


def test_a_real_order_is_placed_whatever_the_flag_says() -> None:
    performer = Performer()
    terms = {"simulator": True, "items": [{"sku": "NW-CHAI", "quantity": 1, "unit_price": "18.00"}]}
    status, body = performer.perform(_delivery("k3", terms))
    assert status == 200 and body["outcome"] == "succeeded" and body["result"]["data"]["order_id"] == "ord_20001"
    assert performer.orders["acct_ada"][0]["order_id"] == "ord_20001"
