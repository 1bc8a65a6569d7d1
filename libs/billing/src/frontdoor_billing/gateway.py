"""The one module that talks to Stripe (the `stripe` SDK, pinned).

Everything Frontdoor asks of Stripe goes through `StripeGateway`: customers, Checkout
Sessions, Customer Portal sessions, invoices, Billing Meter events, and the verification
of Stripe's webhook signatures. Tests point ``api_base`` at `localstripe` (customers,
subscriptions, invoices, signed webhooks) fronted by a small stub for what it lacks
(Checkout, the Portal, meter events); nothing else in the code knows either exists.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import msgspec
import stripe

__all__ = ["GatewayError", "Invoice", "SignatureError", "StripeGateway", "verify_event"]


class GatewayError(Exception):
    """Stripe refused or could not be reached; the message never carries a key."""


class SignatureError(Exception):
    """A webhook whose ``Stripe-Signature`` does not verify (forged, altered or stale)."""


class Invoice(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    number: str | None
    status: str | None
    amount_due: int
    amount_paid: int
    currency: str
    created: int
    hosted_invoice_url: str | None = None


def verify_event(payload: bytes, signature: str | None, secret: str, *, tolerance: int) -> dict[str, Any]:
    """The event of a Stripe webhook, verified over the exact bytes received.

    ``stripe.Webhook.construct_event`` checks the HMAC-SHA256 of ``t.payload`` under
    ``secret`` and that ``t`` is within ``tolerance`` seconds; the event is then parsed
    from the same bytes.

    Raises:
        SignatureError: no header, no matching signature, or a timestamp outside the tolerance.
    """
    if not signature:
        raise SignatureError("no Stripe-Signature header")
    try:
        stripe.Webhook.construct_event(payload.decode("utf-8"), signature, secret, tolerance=tolerance)
    except stripe.SignatureVerificationError as exc:
        raise SignatureError(str(exc.user_message or "signature mismatch")) from None
    except (ValueError, UnicodeDecodeError):
        raise SignatureError("not a JSON event") from None
    event: dict[str, Any] = json.loads(payload)
    if not isinstance(event, dict) or not isinstance(event.get("id"), str) or not isinstance(event.get("created"), int):
        raise SignatureError("not a Stripe event")
    return event


class StripeGateway:
    """Stripe, through the SDK's `StripeClient`, called off the event loop."""

    def __init__(self, api_key: str, *, api_base: str = "", timeout: float = 20.0) -> None:
        bases: dict[str, str] = {}
        if api_base:
            bases = {"api": api_base, "meter_events": api_base, "files": api_base, "connect": api_base}
        self._client = stripe.StripeClient(
            api_key, base_addresses=bases,  # type: ignore[arg-type]
            max_network_retries=2, http_client=stripe.RequestsClient(timeout=timeout),
        )

    async def _call(self, fn: Any, **params: Any) -> Any:
        try:
            return await asyncio.to_thread(fn, params=params)
        except stripe.StripeError as exc:
            raise GatewayError(f"stripe: {type(exc).__name__} {exc.http_status or ''} {exc.code or ''}".strip()) from None

    async def create_customer(self, *, tenant_id: str, name: str, email: str | None) -> str:
        params: dict[str, Any] = {"name": name, "metadata": {"frontdoor_tenant_id": tenant_id}}
        if email:
            params["email"] = email
        customer = await self._call(self._client.v1.customers.create, **params)
        return str(customer.id)

    async def checkout_url(self, *, customer_id: str, tenant_id: str, price: str, plan_id: str,
                           success_url: str, cancel_url: str) -> str:
        """A Stripe Checkout Session subscribing the customer to ``price``: the URL to send the owner to."""
        session = await self._call(
            self._client.v1.checkout.sessions.create,
            mode="subscription", customer=customer_id, client_reference_id=tenant_id,
            line_items=[{"price": price, "quantity": 1}],
            subscription_data={"metadata": {"frontdoor_tenant_id": tenant_id, "frontdoor_plan": plan_id}},
            success_url=success_url, cancel_url=cancel_url,
        )
        return str(session.url)

    async def portal_url(self, *, customer_id: str, return_url: str) -> str:
        """A Customer Portal session (cards, cancellation, invoices): the URL to send the owner to."""
        session = await self._call(self._client.v1.billing_portal.sessions.create,
                                   customer=customer_id, return_url=return_url)
        return str(session.url)

    async def invoices(self, *, customer_id: str, limit: int = 12) -> list[Invoice]:
        page = await self._call(self._client.v1.invoices.list, customer=customer_id, limit=limit)
        # In stripe 16 a StripeObject is no dict (no .get): read each invoice as one.
        rows = [i.to_dict() for i in page.data]
        return [Invoice(id=str(i["id"]), number=i.get("number"), status=i.get("status"),
                        amount_due=int(i.get("amount_due") or 0), amount_paid=int(i.get("amount_paid") or 0),
                        currency=str(i.get("currency") or ""), created=int(i.get("created") or 0),
                        hosted_invoice_url=i.get("hosted_invoice_url")) for i in rows]

    async def meter_event(self, *, event_name: str, identifier: str, customer_id: str, value: int,
                          timestamp: datetime) -> None:
        """One Billing Meter event; Stripe accepts an ``identifier`` once, so a resend is harmless."""
        await self._call(
            self._client.v1.billing.meter_events.create,
            event_name=event_name, identifier=identifier, timestamp=int(timestamp.timestamp()),
            payload={"stripe_customer_id": customer_id, "value": str(value)},
        )
