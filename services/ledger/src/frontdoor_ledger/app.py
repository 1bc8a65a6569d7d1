"""The ledger: the operations endpoint agents call and the ledger API companies call.

Both live under ``{ledger}/{slug}``: ``/operations/{id}`` (+ ``/confirm``, ``/cancel``) for
agents, ``/v1/operations`` for the company's servers. A winning confirm's perform webhook
is attempted at once from this process (the fast path, bounded by
``FRONTDOOR_CONFIRM_WAIT``); the dispatcher's relay retries whatever this process did not
finish, so a crash here loses nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from frontdoor_billing import BillingConfig, SessionAdmission
from frontdoor_core.clock import Clock
from frontdoor_core.errors import DomainError
from frontdoor_core.logging import configure_logging
from frontdoor_core.metrics import DELIVERY_LAG, OUTBOX_DEPTH
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher, user_agent
from frontdoor_core.outbox import OutboxTable
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_core.telemetry import configure_tracing
from frontdoor_httpkit import (
    RequestIdMiddleware,
    SecurityHeadersMiddleware,
    health_routes,
    metrics_lifespan,
    opentelemetry_plugin,
    request_metrics_middleware,
)
from frontdoor_identity import AgentDirectory, DelegatedKeyDirectory
from frontdoor_operations.settled import OutcomeWaiters
from frontdoor_sessions import IssuerKeys
from frontdoor_sessions.replay_cache import ReplayCache
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_webhooks.backlog import backlog
from frontdoor_webhooks.delivery_client import DeliveryClient
from frontdoor_webhooks.delivery_policy import webhook_outbound_policy
from frontdoor_webhooks.sender import SafeSender
from litestar import Litestar, Request, Response
from litestar.exceptions import HTTPException, NotFoundException

from .agent_auth import Refused
from .context import LedgerContext
from .conversations_hub import ConversationsHub
from .delegated_auth import delegated_callers
from .http import agent_conversations, agent_operations, company_api, company_conversations, openapi
from .http.lean_routes import crash_response
from .http.problems import company_problem, is_company_path
from .performer import Performer

__all__ = ["create_app"]

# The event outboxes the dispatcher forwards (tenancy's and sessions').
_OUTBOXES = (OutboxTable("outbox_events"), OutboxTable("session_events"))


def _error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Litestar's own refusals and crashes: a problem on the ledger API (``/{slug}/v1/...``),
    the protocol's ``{"error", "error_description"}`` everywhere else."""
    company = is_company_path(request.url.path)
    headers = {"Cache-Control": "no-store"}
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        if isinstance(exc, NotFoundException):
            if company:
                return company_problem(404, "not_found", "No such resource.")
            return Response({"error": "not_found", "error_description": "No such resource."}, status_code=404,
                            headers=headers)
        if company:
            return company_problem(exc.status_code, "invalid_request", "The request is not valid.")
        return Response({"error": "invalid_request", "error_description": "The request is not valid."},
                        status_code=exc.status_code, headers=headers)
    import structlog

    structlog.get_logger("frontdoor.ledger").error("unhandled_exception", exc_info=exc)
    if company:
        return company_problem(500, "server_error", "Something went wrong on our side. Quote the request_id "
                                                   "if you contact us.")
    return crash_response()


def _refused(_: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    assert isinstance(exc, Refused)
    return exc.response


async def _sample_backlog(app: Litestar) -> None:
    """Delivery lag and outbox depth, for the operator's dashboard (every ledger reports
    the same, cluster-wide values: aggregate them with ``max``)."""
    async with app.state.pool.acquire() as conn:
        found = await backlog(conn, app.state.ctx.now())
        OUTBOX_DEPTH.labels("webhook_messages").set(found.due)
        DELIVERY_LAG.set(found.lag_seconds)
        for table in _OUTBOXES:
            OUTBOX_DEPTH.labels(table.table).set(await table.depth(conn))


def webhook_sender(settings: Settings) -> tuple[SafeSender, DeliveryClient]:
    """What POSTs to tenants' webhook endpoints from the ledger (the perform fast path, first
    conversation deliveries), and its connections (closed at shutdown).

    The deliverer's client under the webhook rules (``FRONTDOOR_WEBHOOK_ALLOWLIST``, never the
    outbound allowlist of Frontdoor's own fetches of agent metadata), over kept-alive connections.
    """
    client = DeliveryClient(webhook_outbound_policy(settings), max_connections=32)
    return SafeSender(client), client


def create_app(settings: Settings, *, clock: Clock | None = None, fetcher: Any = None,
               runtime: Runtime | None = None) -> Litestar:
    """Build the ledger app.

    Args:
        settings: The shared settings.
        clock: Injected time (tests).
        fetcher: The outbound client for agents' metadata and the companies' webhooks
            (default: the SSRF-safe one).
        runtime: A test's own pool and Redis (not closed here).
    """

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = runtime or await Runtime.open(settings, clock=clock)
        the_fetcher = fetcher or SafeFetcher(OutboundPolicy(allow_http_loopback=settings.is_dev,
                                                           allowlist=settings.allowlist(),
                                                           user_agent=user_agent(settings.console_base_url)))
        waiters = OutcomeWaiters(rt.redis)
        await waiters.start()
        kek = Kek.from_env_value(settings.kek)
        ctx = LedgerContext(runtime=rt, keys=IssuerKeys(kek), replay=ReplayCache(rt.redis),
                            directory=AgentDirectory(the_fetcher, rt.clock), waiters=waiters,
                            agent_keys=DelegatedKeyDirectory(the_fetcher, rt.clock))
        # Billing: a suspended tenant's new 1.0 Sessions are refused, as at the issuer (docs/billing.md).
        admission = SessionAdmission(rt.pool, BillingConfig.from_settings(settings), rt.clock,
                                     ttl=settings.billing_standing_cache,
                                     retry_after=max(1, int(settings.billing_sessions_retry_after.total_seconds())))
        ctx.delegated_callers = delegated_callers(ctx, admission=admission.refused)  # PAP 1.0 (ADR 0004 §9)
        sender, webhooks = webhook_sender(settings) if fetcher is None else (None, None)
        ctx.performer = Performer(ctx, fetcher=the_fetcher, kek=kek, sender=sender)
        conversations = ConversationsHub(ctx, fetcher=the_fetcher, kek=kek, sender=sender)
        await conversations.start()
        app.state.conversations = conversations  # hosted conversations (PAP §7)
        app.state.ctx = ctx
        app.state.pool = rt.pool  # the readiness probe
        app.state.redis = rt.redis
        try:
            yield
        finally:
            await ctx.performer.close()
            await conversations.close()
            if webhooks is not None:
                await webhooks.aclose()
            await waiters.stop()
            if runtime is None:
                await rt.close()

    configure_logging(level=settings.log_level, fmt=settings.log_format)
    configure_tracing("frontdoor-ledger", otlp_endpoint=settings.otel_exporter_otlp_endpoint)
    return Litestar(
        route_handlers=[*health_routes("ledger"), *openapi.describe([
            *agent_operations.routes, *company_api.routes, *agent_conversations.routes,
            *company_conversations.routes]), *openapi.routes],
        lifespan=[lifespan, metrics_lifespan("ledger", settings.metrics_port, samplers=[_sample_backlog])],
        # Refusals raised by authentication and dependencies, and the use cases' domain errors.
        exception_handlers={HTTPException: _error, Exception: _error, Refused: _refused,
                            DomainError: company_api.domain_error},
        middleware=[RequestIdMiddleware, request_metrics_middleware("ledger"),
                    lambda app: SecurityHeadersMiddleware(app, hsts=not settings.is_dev)],
        plugins=[opentelemetry_plugin()],  # server spans named by route template; traceparent honoured
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi.OPENAPI_CONFIG,  # the document: GET /openapi.json
        debug=False,
    )
