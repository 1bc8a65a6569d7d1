"""The perform webhook: Frontdoor tells Northwind to place a confirmed order, exactly once.

``POST /webhooks/frontdoor`` is the webhook endpoint of the ``order.place`` operation kind,
and (subscribed to ``conversation.message.created``) of Northwind's concierge
(:mod:`northwind.concierge`): one endpoint, one secret, two event types.
Frontdoor delivers ``operation.perform`` there once per confirmation, signed the Standard
Webhooks way; the sdk's :class:`WebhookVerifier` checks the signature and the time.

Deliveries are at least once: a retry carries the same ``webhook-id`` and the same
``data.idempotency_key``. :class:`Performer` performs once per idempotency key and answers
every retry with the answer it stored (a real company keeps that answer in its database,
under a unique key, in the same transaction as the order). It performs what the confirmed
revision says (``data.operation.terms``), never what the agent asked before.

Northwind's demo answers:

- every line in stock: ``200 succeeded``, an order is placed;
- a line sold out (:data:`catalog.SOLD_OUT`): ``200 failed`` after placing the other lines,
  and ``result.summary`` says exactly what was placed and charged (OPS-6-05);
- a line a supplier confirms later (:data:`catalog.SUPPLIER_CONFIRMS`): ``202``, the outcome
  stays unknown until Northwind calls ``report_outcome`` (in this demo, never).
- the agent simulator's test operation (``"simulator": true`` in its terms, no items): ``200
  succeeded``, nothing ordered or charged.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from frontdoor_sdk import FrontdoorConversations, LedgerError, WebhookVerificationError, WebhookVerifier
from litestar import Litestar, MediaType, Request, Response, Router, get, post

from northwind import catalog
from northwind.concierge import Concierge

__all__ = ["PERFORMER_STATE_KEY", "WEBHOOK_PATH", "Performer", "performer_of", "performed_hook_router",
           "webhook_router"]

WEBHOOK_PATH: Final = "/webhooks/frontdoor"
PERFORMER_STATE_KEY: Final = "northwind_performer"
MAX_BODY: Final = 256 * 1024
_LOG: Final = logging.getLogger("northwind.perform")

Answer = tuple[int, dict[str, Any]]


class Performer:
    """Places confirmed orders, once per idempotency key; counts performs per operation."""

    def __init__(self) -> None:
        self._answers: dict[str, Answer] = {}
        self._performed: Counter[str] = Counter()
        self._order_numbers = itertools.count(20001)
        self.orders: dict[str, list[dict[str, Any]]] = {}
        """Orders placed, per account (a real company writes them to its database)."""

    def performed(self, operation_id: str) -> int:
        """How many times the operation was performed (0 or 1, whatever the retries)."""
        return self._performed[operation_id]

    def perform(self, data: dict[str, Any]) -> Answer:
        """Answer one ``operation.perform`` delivery: the stored answer for a known idempotency key.

        Atomic within the event loop (no ``await``): two concurrent deliveries of one key
        cannot both perform.
        """
        key = data.get("idempotency_key")
        if not isinstance(key, str) or not key:
            return 400, {"error": "invalid_request", "error_description": "no idempotency_key"}
        stored = self._answers.get(key)
        if stored is not None:
            _LOG.info("perform retry answered from the stored answer", extra={"idempotency_key": key})
            return stored
        found = data.get("operation")
        operation: dict[str, Any] = found if isinstance(found, dict) else {}
        operation_id = str(operation.get("operation_id", ""))
        answer = self._place(data, operation)
        self._answers[key] = answer
        self._performed[operation_id] += 1
        _LOG.info(
            "performed operation %s (revision %s) for %s: HTTP %s %s", operation_id, operation.get("revision"),
            data.get("account"), answer[0], answer[1].get("outcome", "outcome to be reported"),
        )
        return answer

    def _place(self, data: dict[str, Any], operation: dict[str, Any]) -> Answer:
        account = data.get("account")
        terms = operation.get("terms")
        items = terms.get("items") if isinstance(terms, dict) else None
        lines = _lines(items)
        if isinstance(terms, dict) and terms.get("simulator") is True and not lines:
            # Frontdoor's agent simulator (issue #19, docs/dashboard.md): its test operation says
            # "simulator": true in its terms; nothing to place, so it succeeds without an order.
            return _outcome("succeeded", "Frontdoor agent simulator test: nothing was ordered or charged.")
        if data.get("kind") != "order.place" or not isinstance(account, str) or not lines:
            return _outcome("failed", "Nothing was ordered or charged: Northwind could not read this order.")
        if any(sku in catalog.SUPPLIER_CONFIRMS for sku, _, _ in lines):
            # The supplier confirms later; Northwind would then call ledger.report_outcome(...).
            return 202, {}
        placed = [line for line in lines if line[0] not in catalog.SOLD_OUT]
        missing = [line for line in lines if line[0] in catalog.SOLD_OUT]
        if not placed:
            names = ", ".join(_name(sku) for sku, _, _ in missing)
            return _outcome("failed", f"Nothing was ordered or charged: {names} is sold out.")
        order_id = f"ord_{next(self._order_numbers)}"
        total = sum((price * quantity for _, quantity, price in placed), Decimal(0))
        self.orders.setdefault(account, []).append(
            {"order_id": order_id, "lines": [{"sku": s, "quantity": q} for s, q, _ in placed], "total": str(total)}
        )
        described = ", ".join(f"{quantity} × {_name(sku)}" for sku, quantity, _ in placed)
        if not missing:
            return _outcome("succeeded", f"Order {order_id} placed: {described}, {total:.2f} EUR charged; "
                                         "it arrives in 3 working days.", {"order_id": order_id})
        not_ordered = ", ".join(f"{quantity} × {_name(sku)}" for sku, quantity, _ in missing)
        return _outcome(
            "failed",
            f"Only part of the order went through: order {order_id} was placed for {described} and "
            f"{total:.2f} EUR was charged; {not_ordered} was not ordered or charged because it is sold out.",
            {"order_id": order_id, "not_ordered": [sku for sku, _, _ in missing]},
        )


def _lines(items: object) -> list[tuple[str, int, Decimal]]:
    """``(sku, quantity, unit price)`` of the confirmed terms; empty if they are not an order."""
    if not isinstance(items, list):
        return []
    lines = []
    for item in items:
        if not isinstance(item, dict):
            return []
        sku, quantity, price = item.get("sku"), item.get("quantity"), item.get("unit_price")
        if not isinstance(sku, str) or not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
            return []
        try:
            lines.append((sku, quantity, Decimal(str(price))))
        except InvalidOperation:
            return []
    return lines


def _name(sku: str) -> str:
    product = catalog.product(sku)
    return product.name if product is not None else sku


def _outcome(outcome: str, summary: str, data: dict[str, Any] | None = None) -> Answer:
    result: dict[str, Any] = {"summary": summary}
    if data is not None:
        result["data"] = data
    return 200, {"outcome": outcome, "result": result}


def performer_of(app: Litestar) -> Performer:
    """The app's :class:`Performer`: ``performer_of(app).performed(operation_id)`` for tests and harnesses."""
    performer = app.state[PERFORMER_STATE_KEY]
    if not isinstance(performer, Performer):
        raise RuntimeError("not a Northwind app")
    return performer


def webhook_router(verifier: WebhookVerifier, performer: Performer, concierge: Concierge | None = None) -> Router:
    """``POST /webhooks/frontdoor``: verify, then perform once per idempotency key, or answer a user's message."""

    @post(WEBHOOK_PATH, request_max_body_size=MAX_BODY)
    async def receive(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        try:
            event = await verifier.verify(await request.body(), request.headers)
        except WebhookVerificationError as refused:
            _LOG.warning("webhook refused: %s", refused.reason)
            return Response({"error": "invalid_webhook", "reason": refused.reason}, status_code=refused.status,
                            media_type=MediaType.JSON)
        message = FrontdoorConversations.message_of(event)
        if message is not None and concierge is not None:
            try:
                await concierge.answer(message)
            except LedgerError:
                _LOG.warning("could not answer conversation %s yet", message.conversation_id)
                return Response({}, status_code=503, media_type=MediaType.JSON)  # Frontdoor delivers it again
            return Response({}, status_code=200, media_type=MediaType.JSON)
        if event.type != "operation.perform":
            return Response({}, status_code=200, media_type=MediaType.JSON)  # not ours to act on
        status, body = performer.perform(event.data)
        return Response(body, status_code=status, media_type=MediaType.JSON)

    return Router("/", route_handlers=[receive], include_in_schema=False)


def performed_hook_router(performer: Performer) -> Router:
    """``GET /_test/performed/{operation_id}``: only with ``expose_test_hooks`` (tests, conformance)."""

    @get("/_test/performed/{operation_id:str}")
    async def performed(operation_id: str) -> dict[str, Any]:
        return {"operation_id": operation_id, "performed": performer.performed(operation_id)}

    return Router("/", route_handlers=[performed], include_in_schema=False)
