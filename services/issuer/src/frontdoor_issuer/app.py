"""The issuer: each tenant's PAP authorization server under ``{base}/{slug}``."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from frontdoor_billing import BillingConfig, SessionAdmission
from frontdoor_core.clock import Clock
from frontdoor_core.logging import configure_logging
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher, user_agent
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
from frontdoor_sessions import (
    AuthorizationCodeGrant,
    AuthorizationCodeStore,
    DelegatedCallers,
    DeviceAuthorization,
    DeviceCodeGrant,
    DeviceStore,
    GrantDeps,
    IssuerKeys,
    JoinCodeStore,
    MediatedSignIns,
    NonceSource,
    RefreshGrant,
    ReplayCache,
    Revocation,
    SessionGrant,
    StreamWakeups,
)
from frontdoor_tenancy.credentials.key_encryption import Kek
from litestar import Litestar, Request, Response
from litestar.config.csrf import CSRFConfig
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.exceptions import HTTPException, NotFoundException
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from . import openapi
from .context import IssuerContext, nonce_secret
from .http import (
    account_agents,
    account_disconnect,
    authorize,
    browser_join_pages,
    browser_verify,
    company_problems,
    device_authorization,
    device_pages,
    discovery,
    feedback,
    introspect,
    mediated,
    oidc_backchannel,
    oidc_client_jwks,
    oidc_pages,
    poppy_state,
    revoke,
    sign_in_pages,
    ssf,
    token,
)

__all__ = ["create_app"]

_HERE = Path(__file__).parent


def _protocol_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Protocol surfaces answer ``{"error", "error_description"}`` (RFC 6749 §5.2 shape); the
    company's account routes (``/{slug}/accounts/*``) RFC 9457 problems."""
    accounts = company_problems.is_account_path(request.url.path)
    if isinstance(exc, NotFoundException):
        return company_problems.no_issuer() if accounts else discovery.not_found()
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        if accounts:
            return company_problems.account_problem(exc.status_code, "invalid_request", "The request is not valid.")
        return Response({"error": "invalid_request", "error_description": "The request is not valid."},
                        status_code=exc.status_code, headers={"Cache-Control": "no-store"})
    import structlog

    structlog.get_logger("frontdoor.issuer").error("unhandled_exception", exc_info=exc)
    if accounts:
        return company_problems.account_problem(500, "server_error", "Something went wrong on our side. Quote the "
                                                                   "request_id if you contact us.")
    return Response({"error": "server_error", "error_description": "Something went wrong on our side."},
                    status_code=500, headers={"Cache-Control": "no-store"})


def create_app(settings: Settings, *, clock: Clock | None = None, fetcher: Any = None) -> Litestar:
    """Build the issuer app."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = await Runtime.open(settings, clock=clock)
        the_fetcher = fetcher or SafeFetcher(OutboundPolicy(allow_http_loopback=settings.is_dev,
                                                           allowlist=settings.allowlist(),
                                                           user_agent=user_agent(settings.console_base_url)))
        directory = AgentDirectory(the_fetcher, rt.clock)
        keys = IssuerKeys(Kek.from_env_value(settings.kek))
        deps = GrantDeps(pool=rt.pool, redis=rt.redis, directory=directory, keys=keys,
                         nonces=NonceSource(nonce_secret(settings)), clock=rt.clock)
        # Billing: new Sessions are refused after an unpaid grace period (account read cached).
        admission = SessionAdmission(rt.pool, BillingConfig.from_settings(settings), rt.clock,
                                     ttl=settings.billing_standing_cache,
                                     retry_after=max(1, int(settings.billing_sessions_retry_after.total_seconds())))
        app.state.session_admission = admission
        grant = SessionGrant(deps, admission=admission.refused, idle_lifetime=settings.session_retention)
        device_store = DeviceStore(rt.redis, clock=rt.clock)
        app.state.ctx = IssuerContext(runtime=rt, keys=keys, grant=grant, directory=directory,
                                      devices=device_store, kek=Kek.from_env_value(settings.kek),
                                      fetcher=the_fetcher)
        # One grant per type; the token endpoint dispatches on grant_type.
        code_store = AuthorizationCodeStore(rt.redis, clock=rt.clock)
        refresh = RefreshGrant(deps, idle_lifetime=settings.session_retention)
        app.state.grants = {g.grant_type: g for g in (grant, DeviceCodeGrant(deps, device_store), refresh,
                                                      AuthorizationCodeGrant(deps, code_store))}
        app.state.authorization_codes = code_store
        app.state.device_store = device_store
        app.state.device_authorization = DeviceAuthorization(deps, device_store)
        app.state.revocation = Revocation(deps)
        app.state.mediated = MediatedSignIns(deps, the_fetcher)
        app.state.agent_keys = DelegatedKeyDirectory(the_fetcher, rt.clock)  # PAP 1.0 (ADR 0004 §6)
        # The hosted 1.0 browser join (ADR 0004 §8): its codes, and its agents' Session headers.
        app.state.join_codes = JoinCodeStore(rt.redis, clock=rt.clock)
        app.state.delegated_callers = DelegatedCallers(
            pool=rt.pool, issuer_keys=keys, agent_keys=app.state.agent_keys, replay=ReplayCache(rt.redis),
            dpop_namespace="dpop-join", dev=settings.is_dev, admission=admission.refused)
        app.state.pool = rt.pool
        app.state.redis = rt.redis
        # Shared Signals (ADR 0005): held polls wake when an outbox row commits.
        app.state.ssf_wakeups = StreamWakeups(settings.database_url)
        app.state.ssf_wakeups.start()
        try:
            yield
        finally:
            await app.state.ssf_wakeups.close()
            await rt.close()

    configure_logging(level=settings.log_level, fmt=settings.log_format)
    configure_tracing("frontdoor-issuer", otlp_endpoint=settings.otel_exporter_otlp_endpoint)
    return Litestar(
        route_handlers=[*health_routes("issuer"), *discovery.routes, token.token, introspect.introspection,
                        feedback.feedback, device_authorization.device_authorization, revoke.revoke,
                        mediated.mediated_start, mediated.mediated_code,
                        account_disconnect.account_disconnect, account_agents.account_agents, *device_pages.routes,
                        authorize.authorize, *sign_in_pages.routes, *oidc_pages.routes, *oidc_backchannel.routes,
                        *oidc_client_jwks.routes,
                        *browser_verify.routes,  # the browser join (PAP §5), for companies' websites
                        *poppy_state.routes,  # PAP 1.0: agent keys and Session state for the sdk
                        *browser_join_pages.routes,  # PAP 1.0: the hosted browser join (ADR 0004 §8)
                        *ssf.routes,  # Shared Signals transmitter for the sdk (ADR 0005)
                        *openapi.routes,  # GET /openapi.json: the company-facing routes
                        create_static_files_router(path="/_static", directories=[_HERE / "static"],
                                                   include_in_schema=False)],
        lifespan=[lifespan, metrics_lifespan("issuer", settings.metrics_port)],
        exception_handlers={HTTPException: _protocol_error, Exception: _protocol_error},
        middleware=[RequestIdMiddleware, request_metrics_middleware("issuer"),
                    lambda app: SecurityHeadersMiddleware(app, hsts=not settings.is_dev)],
        plugins=[opentelemetry_plugin()],  # server spans named by route template; traceparent honoured
        request_max_body_size=settings.max_body_bytes,
        template_config=TemplateConfig(directory=_HERE / "templates", engine=JinjaTemplateEngine),
        # Forms on Frontdoor's own pages carry CSRF tokens; protocol endpoints authenticate
        # otherwise (client assertions, DPoP, credentials) and the login callback is bound
        # to the browser's flow cookie and a signed, one-use answer. The 1.0 join's authorize
        # takes the agent's Session header; its redeem is bound to the join cookie set with
        # the code, and must consume the code even when a submission is refused.
        csrf_config=CSRFConfig(
            secret=hashlib.sha256(b"frontdoor/issuer-csrf/v1\x00" + settings.kek.encode()).hexdigest(),
            cookie_secure=not settings.is_dev, cookie_httponly=True, cookie_samesite="lax",
            exclude=[r"^/[^/]+/oauth/", r"^/[^/]+/feedback$", r"^/[^/]+/accounts/", r"^/[^/]+/login/callback$",
                     r"^/[^/]+/browser/(verify|state)$", r"^/[^/]+/poppy/(agent-keys|session-state)$",
                     r"^/[^/]+/join/(authorize|redeem)$", r"^/[^/]+/ssf/streams", r"^/[^/]+/oidc/backchannel-logout$",
                     r"/\.well-known/", r"^/healthz$", r"^/readyz$"],
        ),
        openapi_config=None,
        debug=False,
    )
