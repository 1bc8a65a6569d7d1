"""Billing in the console: the Billing page, Checkout and the Customer Portal, the limits'
answers, the management API's ``GET /api/v1/billing``, and Stripe's webhooks.

Owners manage billing (upgrade through Stripe Checkout, cards, cancellation and invoices
through the Customer Portal); admins and viewers see the same page read-only: the plan
and usage are no secret inside the company, paying is the owner's call.

``POST /billing/stripe/webhook`` is public (Stripe calls it) and CSRF-exempt; it trusts
nothing but the ``Stripe-Signature`` over the exact bytes (`frontdoor_billing.verify_event`).
"""

from __future__ import annotations

from typing import Any

import structlog
from frontdoor_billing import (
    METRIC_LABELS,
    METRICS,
    BillingConfig,
    GatewayError,
    LimitReached,
    SignatureError,
    apply_stripe_event,
    ensure_account,
    get_account,
    month_usage,
    resource_counts,
    standing_of,
)
from frontdoor_core.db import transaction
from frontdoor_httpkit import content_security_policy, origin_source, problem
from frontdoor_tenancy.actor import Actor
from litestar import Request, Response, Router, get, post
from litestar.datastructures import ResponseHeader, State
from litestar.di import Provide
from litestar.response import Redirect, Template

from ..access import PUBLIC, opt
from .deps import ctx_of
from .page import EXCEPTION_HANDLERS, Console, error_page, provide_console
from .problems import PROBLEMS

__all__ = ["LIMIT_HANDLERS", "api_routes", "billing_config", "public_routes", "require_room", "router"]

_log = structlog.get_logger("frontdoor.billing")
_STATE_KEY = "billing_config"


def billing_config(state: State) -> BillingConfig:
    """The process's billing configuration, read once from the settings."""
    config: BillingConfig | None = getattr(state, _STATE_KEY, None)
    if config is None:
        config = BillingConfig.from_settings(ctx_of(state).settings)
        setattr(state, _STATE_KEY, config)
    return config


async def _overview(state: State, tenant_id: str) -> dict[str, Any]:
    ctx, config = ctx_of(state), billing_config(state)
    now = ctx.now()
    async with ctx.pool.acquire() as conn:
        account = await get_account(conn, tenant_id) if config.enabled else None
        usage = await month_usage(conn, tenant_id, now)
        owned = await resource_counts(conn, tenant_id)
    standing = standing_of(account, config.catalogue, enabled=config.enabled, now=now)
    plan = standing.plan
    return {
        "enabled": config.enabled, "standing": standing, "plan": plan, "account": account,
        "usage": usage, "owned": owned, "currency": config.catalogue.currency,
        "rows": [{"metric": m, "label": METRIC_LABELS[m], "used": usage[m],
                  "allowance": None if not config.enabled else plan.allowance(m)} for m in METRICS],
        "limits": [{"limit": name, "label": METRIC_LABELS[name], "owned": owned[name],
                    "allowed": standing.limit(name)} for name in ("domains", "webhook_endpoints")],
        "projected": plan.projected_bill(usage) if config.enabled else 0,
        "banners": standing.banners(usage),
        "upgrade": config.catalogue.get(config.catalogue.upgrade_plan),
    }


# ---------------------------------------------------------------- dashboard

# Where the Upgrade and Manage forms end: their POST is answered by a redirect to Stripe's
# Checkout or Customer Portal, and browsers hold that redirect to the page's form-action.
_STRIPE_PAGES = ("https://checkout.stripe.com", "https://billing.stripe.com")


def _billing_page_csp(api_base: str) -> str:
    """The Billing page's policy: its forms may end at Stripe's pages (and at ``STRIPE_API_BASE``'s origin)."""
    sources = [*_STRIPE_PAGES, *([origin_source(api_base)] if api_base else [])]
    return content_security_policy(form_action=[s for s in sources if s])


@get("/billing", name="billing.page")
async def billing_page(console: Console, state: State, notice: str | None = None) -> Template:
    view = await _overview(state, console.tenant.id)
    invoices: list[Any] = []
    config = billing_config(state)
    if config.enabled and config.gateway and view["account"] and view["account"].stripe_customer_id:
        try:
            invoices = await config.gateway.invoices(customer_id=view["account"].stripe_customer_id)
        except GatewayError as exc:
            _log.warning("stripe_invoices_unavailable", error=str(exc))
    notices = {"upgraded": "Thank you: your upgrade is being confirmed by Stripe and shows here in a moment.",
               "cancelled": "Checkout was cancelled; nothing changed."}
    page = console.page("billing.html", nav="billing", invoices=invoices, notice=notices.get(notice or ""), **view)
    page.headers["Content-Security-Policy"] = _billing_page_csp(ctx_of(state).settings.stripe_api_base)
    return page


@get("/billing/banner", name="billing.banner")
async def billing_banner(console: Console, state: State) -> Template:
    """The banners every page loads (htmx): a failed payment, a suspension, usage past the allowance."""
    view = await _overview(state, console.tenant.id)
    return Template("_billing_banner.html", context={"banners": view["banners"], "standing": view["standing"],
                                                      "is_owner": console.is_owner})


async def _customer(state: State, console: Console) -> str:
    ctx, config = ctx_of(state), billing_config(state)
    assert config.gateway is not None
    async with transaction(ctx.pool) as conn:
        await ensure_account(conn, console.tenant.id, default_plan=config.catalogue.default_plan, now=ctx.now())
        row = await conn.fetchrow("SELECT stripe_customer_id FROM billing_accounts WHERE tenant_id = $1 FOR UPDATE",
                                  console.tenant.id)
        if row["stripe_customer_id"]:
            return str(row["stripe_customer_id"])
        customer = await config.gateway.create_customer(tenant_id=console.tenant.id, name=console.tenant.organization_name,
                                                        email=console.session.admin.email)
        await conn.execute("UPDATE billing_accounts SET stripe_customer_id = $2, updated_at = $3 WHERE tenant_id = $1",
                           console.tenant.id, customer, ctx.now())
        return customer


@post("/billing/checkout", opt=opt("manage_members"))
async def billing_checkout(console: Console, state: State) -> Response[Any]:
    """Upgrade: a Stripe Checkout Session for the upgrade plan, then Stripe's own page."""
    console.require("manage_members")
    config = billing_config(state)
    if not config.enabled or config.gateway is None:
        return error_page(409, "Billing is off", "This Frontdoor has no Stripe account configured: every plan limit is off.")
    base = ctx_of(state).settings.console_base_url
    plan = config.catalogue.get(config.catalogue.upgrade_plan)
    try:
        customer = await _customer(state, console)
        url = await config.gateway.checkout_url(
            customer_id=customer, tenant_id=console.tenant.id, price=str(plan.stripe_price), plan_id=plan.id,
            success_url=f"{base}/billing?notice=upgraded", cancel_url=f"{base}/billing?notice=cancelled")
    except GatewayError as exc:
        _log.warning("stripe_checkout_failed", error=str(exc))
        return error_page(503, "Stripe is unavailable", "Stripe could not be reached; try again in a minute.")
    return Redirect(url, status_code=303)


@post("/billing/portal", opt=opt("manage_members"))
async def billing_portal(console: Console, state: State) -> Response[Any]:
    """Manage cards, cancel and download invoices: Stripe's Customer Portal."""
    console.require("manage_members")
    config = billing_config(state)
    if not config.enabled or config.gateway is None:
        return error_page(409, "Billing is off", "This Frontdoor has no Stripe account configured.")
    try:
        customer = await _customer(state, console)
        url = await config.gateway.portal_url(customer_id=customer,
                                              return_url=f"{ctx_of(state).settings.console_base_url}/billing")
    except GatewayError as exc:
        _log.warning("stripe_portal_failed", error=str(exc))
        return error_page(503, "Stripe is unavailable", "Stripe could not be reached; try again in a minute.")
    return Redirect(url, status_code=303)


# ---------------------------------------------------------------- management API


@get("/api/v1/billing", responses=PROBLEMS, tags=["billing"], summary="Your plan, this month's usage and limits")
async def api_billing(actor: Actor, state: State) -> dict[str, Any]:
    view = await _overview(state, actor.tenant_id)
    standing = view["standing"]
    return {
        "billing_enabled": view["enabled"],
        "plan": {"id": view["plan"].id, "name": view["plan"].name},
        "status": standing.status,
        "grace_until": standing.grace_until.isoformat().replace("+00:00", "Z") if standing.grace_until else None,
        "usage": {r["metric"]: {"used": r["used"], "allowance": r["allowance"]} for r in view["rows"]},
        "limits": {r["limit"]: {"owned": r["owned"], "allowed": r["allowed"]} for r in view["limits"]},
        "projected_bill": {"amount": view["projected"], "currency": view["currency"]},
    }


# ---------------------------------------------------------------- Stripe's webhooks


@post("/billing/stripe/webhook", opt=opt(PUBLIC), include_in_schema=False, status_code=200)
async def stripe_webhook(request: Request[Any, Any, Any], state: State) -> Response[Any]:
    config = billing_config(state)
    if not config.enabled:
        return Response({"error": "billing_disabled"}, status_code=404)
    payload = await request.body()
    from frontdoor_billing import verify_event

    try:
        event = verify_event(payload, request.headers.get("stripe-signature"), config.webhook_secret,
                             tolerance=config.webhook_tolerance)
    except SignatureError as exc:
        _log.info("stripe_webhook_refused", reason=str(exc))
        return Response({"error": "invalid_signature"}, status_code=400)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        outcome = await apply_stripe_event(conn, event, catalogue=config.catalogue, grace=config.grace_period,
                                           now=ctx.now(), billing_url=f"{ctx.settings.console_base_url}/billing")
    return Response({"received": True, "outcome": outcome}, status_code=200)


# ---------------------------------------------------------------- the limits' answers


def _on_limit(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, LimitReached)
    if request.url.path.startswith("/api/"):
        return problem(402, exc.code, exc.detail, extra={"limit": exc.limit, "allowed": exc.allowed,
                                                         "plan": exc.plan, "upgrade_url": "/billing"})
    return Template("billing_limit.html", status_code=402, context={"message": exc.detail, "limit": exc.limit},
                    headers={"Cache-Control": "no-store"})


LIMIT_HANDLERS: dict[Any, Any] = {LimitReached: _on_limit}


async def require_room(state: State, conn: Any, tenant_id: str, limit: Any) -> None:
    """The hard limit on ``limit`` in the caller's transaction (`frontdoor_billing.require_room_for`)."""
    from frontdoor_billing import require_room_for

    await require_room_for(conn, billing_config(state), tenant_id, limit, now=ctx_of(state).now())


dashboard_routes: list[Any] = [billing_page, billing_banner, billing_checkout, billing_portal]
router = Router(path="/", route_handlers=dashboard_routes, dependencies={"console": Provide(provide_console)},
                exception_handlers=EXCEPTION_HANDLERS,
                response_headers=[ResponseHeader(name="Cache-Control", value="no-store")], include_in_schema=False)
api_routes: list[Any] = [api_billing]
public_routes: list[Any] = [stripe_webhook]
