"""Northwind's data: a product catalogue, two demo accounts and their orders.

A real company reads its database here. The account IDs are the ones Northwind gives
Frontdoor when a user signs in (the login handoff's ``sub``); Frontdoor hands them back as
``Caller.account``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Product:
    """One product for sale."""

    sku: str
    name: str
    price: str
    currency: str


@dataclass(frozen=True)
class OrderLine:
    """A quantity of one product in an order."""

    sku: str
    quantity: int


@dataclass(frozen=True)
class Order:
    """An order placed by an account."""

    order_id: str
    placed_on: str
    status: str
    lines: tuple[OrderLine, ...]
    total: str
    currency: str


@dataclass(frozen=True)
class DemoAccount:
    """A customer who can sign in on Northwind's login page (password: the demo password)."""

    email: str
    account_id: str
    name: str


DEMO_ACCOUNTS: tuple[DemoAccount, ...] = (
    DemoAccount("ada@northwind.example", "acct_ada", "Ada Lovelace"),
    DemoAccount("grace@northwind.example", "acct_grace", "Grace Hopper"),
)


def demo_account(email: str) -> DemoAccount | None:
    """The demo account with this email (compared case-insensitively), if any."""
    wanted = email.strip().casefold()
    return next((account for account in DEMO_ACCOUNTS if account.email == wanted), None)


PRODUCTS: tuple[Product, ...] = (
    Product("NW-CHAI", "Chai", "18.00", "EUR"),
    Product("NW-CHANG", "Chang", "19.00", "EUR"),
    Product("NW-SYRUP", "Aniseed Syrup", "10.00", "EUR"),
    Product("NW-CAJUN", "Chef Anton's Cajun Seasoning", "22.00", "EUR"),
    Product("NW-GNOCCHI", "Gnocchi di nonna Alice", "38.00", "EUR"),
)

_ORDERS: dict[str, tuple[Order, ...]] = {
    "acct_ada": (
        Order("ord_10248", "2026-10-02", "delivered", (OrderLine("NW-CHAI", 2), OrderLine("NW-SYRUP", 1)), "46.00", "EUR"),
        Order("ord_10391", "2026-11-20", "shipped", (OrderLine("NW-GNOCCHI", 1),), "38.00", "EUR"),
    ),
    "acct_grace": (
        Order("ord_10307", "2026-11-05", "processing", (OrderLine("NW-CAJUN", 3),), "66.00", "EUR"),
    ),
}


def search_products(query: str = "") -> list[Product]:
    """The products whose name contains ``query`` (case-insensitive); all for ``""``."""
    needle = query.strip().casefold()
    return [product for product in PRODUCTS if needle in product.name.casefold()]


def orders_of(account: str) -> list[Order]:
    """The orders of one account, newest first; none for an unknown account."""
    return sorted(_ORDERS.get(account, ()), key=lambda order: order.placed_on, reverse=True)


SOLD_OUT: frozenset[str] = frozenset({"NW-CHANG"})
"""Products the warehouse turns out to have none of when it picks an order.

An order that includes one fails partway when performed: the other lines are placed and
charged, these are not, and the outcome says so (PAP Operations, OPS-6-05).
"""

SUPPLIER_CONFIRMS: frozenset[str] = frozenset({"NW-CAJUN"})
"""Products shipped by a supplier who confirms an order later, not while Frontdoor waits.

Performing an order that includes one answers ``202``: the outcome stays unknown
(``in_progress``) until Northwind reports it with the sdk's ``report_outcome``.
"""


def product(sku: str) -> Product | None:
    """The product with this SKU, if Northwind sells it."""
    return next((item for item in PRODUCTS if item.sku == sku), None)


def order_of(account: str, order_id: str | None = None) -> Order | None:
    """One of the account's orders (its most recent when ``order_id`` is ``None``), if any."""
    orders = orders_of(account)
    if order_id is None:
        return orders[0] if orders else None
    return next((order for order in orders if order.order_id == order_id), None)
