"""Placing orders as operations (PAP Operations §4): propose through Frontdoor, never perform here.

An agent asks Northwind to order something through any channel (``POST /api/orders``,
``POST /api/orders/reorder``, the MCP tools ``place_order`` and ``reorder``, or a
conversation message asking to reorder). Northwind does not order anything then: it
proposes an operation in Frontdoor's ledger with the sdk's :class:`FrontdoorLedger` and
answers ``202 {"operation": ...}``. The user's agent confirms it at Frontdoor's
operations endpoint (or the user on :mod:`northwind.operation_page`); Frontdoor then calls
the perform webhook (:mod:`northwind.perform`) once.

Northwind's rules:

- Every proposal needs a signed-in Session (``orders:read``): an order belongs to an
  account. A signed-out Session gets ``403 sign_in_required`` from the sdk's middleware.
- One ``action_key`` per action, the same in every channel, so the same action is the same
  operation (OPS-4-01): ``reorder:{order_id}`` for a reorder, ``order:{digest of the items}``
  for a new order.
- ``user_approval_required``: a new order up to :data:`STANDING_LIMIT` may be confirmed under
  a standing permission (action :data:`STANDING_ACTION`, bounded by ``total.amount``); a
  larger one, and every reorder (it ships to the old order's address, which only the user
  can check), needs the user's own approval.
- An agent that does not list the operations extension gets ``403 extension_required``
  (Frontdoor refuses the proposal; nothing is proposed, OPS-2-01); Frontdoor unavailable
  is ``503`` with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Annotated, Any, Final

import msgspec
from frontdoor_sdk import Caller, FrontdoorLedger, LedgerError, Refusal, operation_accepted
from litestar import MediaType, Request, Response, post
from litestar.exceptions import ValidationException
from litestar.handlers import HTTPRouteHandler

from northwind import catalog
from northwind.protection import verified_caller

__all__ = [
    "KIND",
    "STANDING_ACTION",
    "STANDING_LIMIT",
    "InvalidOrder",
    "OperationAccepted",
    "OrderItem",
    "Ordering",
    "ordering_handlers",
]

KIND: Final = "order.place"
"""The operation kind, configured once in the management API (``PUT /api/v1/operation-kinds/order.place``)."""
STANDING_ACTION: Final = KIND
"""The action a user's standing permission names to cover Northwind orders."""
STANDING_LIMIT: Final = Decimal("50.00")
"""The largest new order (``total.amount``, EUR) that a standing permission may cover."""
EXPIRES_IN: Final = 900
"""Seconds a proposal stays open."""
MAX_BODY: Final = 8_192

Sku = Annotated[str, msgspec.Meta(pattern=r"^[A-Z0-9-]{1,32}$")]
Quantity = Annotated[int, msgspec.Meta(ge=1, le=99)]


class OrderItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A product and how many."""

    sku: Sku
    quantity: Quantity


class PlaceOrder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /api/orders``: what to order."""

    items: Annotated[list[OrderItem], msgspec.Meta(min_length=1, max_length=20)]


class Reorder(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /api/orders/reorder``: which of your orders to order again (the latest if omitted)."""

    order_id: Annotated[str, msgspec.Meta(pattern=r"^ord_[0-9]{1,12}$")] | None = None


class OperationAccepted(msgspec.Struct, frozen=True):
    """The ``202`` answer: the operation proposed (PAP Operations §4.1). Confirm it at the operations endpoint."""

    operation: dict[str, Any]


class InvalidOrder(Exception):
    """The request names something Northwind cannot order: ``{"error": code}`` with ``status``."""

    def __init__(self, status: int, code: str, description: str) -> None:
        super().__init__(description)
        self.status, self.code, self.description = status, code, description


class ProposalRefused(Exception):
    """Frontdoor refused or could not take the proposal: answer the agent with ``refusal``."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.error)
        self.refusal = refusal


def _money(amount: Decimal) -> str:
    return str(amount.quantize(Decimal("0.01")))


class Ordering:
    """Builds Northwind's order proposals and sends them to Frontdoor's ledger.

    Args:
        ledger: The sdk's ledger client (closed by the app at shutdown).
        page_url: The operations' page, with ``{operation_id}``.
    """

    def __init__(self, ledger: FrontdoorLedger, page_url: str) -> None:
        self.ledger = ledger
        self._page_url = page_url

    async def place(self, caller: Caller, items: list[OrderItem]) -> dict[str, Any]:
        """Propose a new order of ``items`` for the caller's account; the operation.

        Raises:
            InvalidOrder: An unknown product.
            LedgerError: Frontdoor refused (``extension_required``...) or is unavailable.
        """
        lines = _merge(items)
        total = _total(lines)
        digest = hashlib.sha256(json.dumps(sorted(lines.items())).encode()).hexdigest()[:32]
        return await self._propose(
            caller,
            lines,
            summary=f"Order {_describe(lines)}: {_money(total)} EUR in total, charged to your Northwind "
                    "account and sent by standard delivery (3 working days).",
            terms={},
            user_approval_required=total > STANDING_LIMIT,
            action_key=f"order:{digest}",
            extra_input={},
        )

    async def reorder(self, caller: Caller, order_id: str | None = None) -> dict[str, Any]:
        """Propose ordering one of the caller's orders again (the latest by default); the operation.

        Raises:
            InvalidOrder: No such order for this account (``404 order_not_found``).
            LedgerError: Frontdoor refused or is unavailable.
        """
        order = catalog.order_of(_account(caller), order_id)
        if order is None:
            raise InvalidOrder(404, "order_not_found", "no such order in your account")
        lines = _merge([OrderItem(line.sku, line.quantity) for line in order.lines])
        total = _total(lines)
        return await self._propose(
            caller,
            lines,
            summary=f"Reorder {order.order_id}: {_describe(lines)}: {_money(total)} EUR in total, charged to "
                    f"your Northwind account and delivered to the address of order {order.order_id}.",
            terms={"reorder_of": order.order_id},
            user_approval_required=True,
            action_key=f"reorder:{order.order_id}",
            extra_input={"reorder_of": order.order_id},
        )

    async def _propose(self, caller: Caller, lines: dict[str, int], *, summary: str, terms: dict[str, Any],
                       user_approval_required: bool, action_key: str, extra_input: dict[str, Any]) -> dict[str, Any]:
        _account(caller)
        total = _total(lines)
        result = await self.ledger.propose(
            caller,
            kind=KIND,
            summary=summary,
            terms={
                "items": [
                    {"sku": sku, "name": _product(sku).name, "quantity": quantity, "unit_price": _product(sku).price}
                    for sku, quantity in lines.items()
                ],
                "total": {"amount": _money(total), "currency": "EUR"},
                "delivery": "standard",
                **terms,
            },
            user_approval_required=user_approval_required,
            expires_in=EXPIRES_IN,
            action_key=action_key,
            input={"items": [{"sku": sku, "quantity": quantity} for sku, quantity in lines.items()], **extra_input},
            url=self._page_url,
        )
        return result.operation


def _account(caller: Caller) -> str:
    if caller.account is None:
        # The middleware requires orders:read on every ordering path: a bug if reached.
        raise RuntimeError("orders need a signed-in caller: protect this path with a scope")
    return caller.account


def _product(sku: str) -> catalog.Product:
    found = catalog.product(sku)
    if found is None:
        raise InvalidOrder(400, "invalid_request", "an item names a product Northwind does not sell")
    return found


def _merge(items: list[OrderItem]) -> dict[str, int]:
    """Quantities per SKU, in SKU order (so the same order is always the same action)."""
    lines: dict[str, int] = {}
    for item in items:
        _product(item.sku)
        lines[item.sku] = lines.get(item.sku, 0) + item.quantity
        if lines[item.sku] > 99:
            raise InvalidOrder(400, "invalid_request", "at most 99 of one product")
    return dict(sorted(lines.items()))


def _total(lines: dict[str, int]) -> Decimal:
    return sum((Decimal(_product(sku).price) * quantity for sku, quantity in lines.items()), Decimal(0))


def _describe(lines: dict[str, int]) -> str:
    return ", ".join(
        f"{quantity} × {_product(sku).name} at {_product(sku).price} EUR each" for sku, quantity in lines.items()
    )


# --- the routes -------------------------------------------------------------------------


def _invalid_order(_: Request[Any, Any, Any], exc: InvalidOrder) -> Response[dict[str, str]]:
    return Response({"error": exc.code, "error_description": exc.description}, status_code=exc.status,
                    media_type=MediaType.JSON, headers={"Cache-Control": "no-store"})


def _refused(_: Request[Any, Any, Any], exc: ProposalRefused) -> Response[bytes]:
    refusal = exc.refusal
    headers = {name: value for name, value in refusal.headers.items() if name.lower() != "content-type"}
    return Response(refusal.content, status_code=refusal.status, headers=headers, media_type=MediaType.JSON)


def _invalid(_: Request[Any, Any, Any], __: ValidationException) -> Response[dict[str, str]]:
    return Response({"error": "invalid_request", "error_description": "the body is not a valid order"},
                    status_code=400, media_type=MediaType.JSON)


_OPERATION_DOC: Final = (
    "Proposes an **operation** (PAP Operations extension v1): nothing is ordered yet. Answers 202 "
    "`{\"operation\": ...}`; confirm the operation at the operations endpoint of Northwind's poppy.json "
    "(`extensions.operations.endpoint`). The same action through the API, the MCP tools and a conversation "
    "returns the same operation. Needs a signed-in Session with `orders:read`; an agent that does not list "
    "the `operations` extension gets 403 `extension_required`."
)


_ACCEPTED_DOC: Final = "The operation proposed, `{\"operation\": ...}`: proposed, not performed."
_HANDLERS: Final[Any] = {InvalidOrder: _invalid_order, ProposalRefused: _refused, ValidationException: _invalid}


def ordering_handlers(ordering: Ordering) -> list[HTTPRouteHandler]:
    """``POST /api/orders`` and ``POST /api/orders/reorder``: both answer 202 with an operation.

    Handlers, not a router: ``/api/orders`` also has ``GET`` (the orders list), and Litestar
    wants one registration per path.
    """

    async def accepted(call: Any) -> OperationAccepted:
        try:
            return OperationAccepted(**operation_accepted(await call))
        except LedgerError as failure:
            raise ProposalRefused(failure.refusal()) from None

    @post("/api/orders", status_code=202, exception_handlers=_HANDLERS, summary="Place an order (returns an operation)", tags=["orders"],
          description=_OPERATION_DOC, request_max_body_size=MAX_BODY, operation_id="placeOrder",
          response_description=_ACCEPTED_DOC)
    async def place(request: Request[Any, Any, Any], data: PlaceOrder) -> OperationAccepted:
        """Propose an order of ``items``; a standing permission may cover one up to 50.00 EUR."""
        return await accepted(ordering.place(verified_caller(request.scope), data.items))

    @post("/api/orders/reorder", status_code=202, exception_handlers=_HANDLERS, summary="Order one of your orders again (returns an operation)",
          tags=["orders"], description=_OPERATION_DOC, request_max_body_size=MAX_BODY, operation_id="reorder",
          response_description=_ACCEPTED_DOC)
    async def reorder(request: Request[Any, Any, Any], data: Reorder | None = None) -> OperationAccepted:
        """Propose reordering ``order_id`` (your latest order if omitted); always needs the user's approval."""
        return await accepted(ordering.reorder(verified_caller(request.scope), data.order_id if data else None))

    return [place, reorder]
