"""The console: sign-up, admin login, the management API (and, later, the dashboard)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from frontdoor_core.clock import Clock
from frontdoor_core.logging import configure_logging
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_core.telemetry import configure_tracing
from frontdoor_httpkit import (
    RequestIdMiddleware,
    SecurityHeadersMiddleware,
    health_routes,
    make_json_guard,
    metrics_lifespan,
    opentelemetry_plugin,
    problem_exception_handlers,
    request_metrics_middleware,
)
from frontdoor_tenancy.credentials.key_encryption import Kek
from litestar import Litestar, Request, get
from litestar.config.csrf import CSRFConfig
from litestar.contrib.jinja import JinjaTemplateEngine
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from .access import role_guard
from .context import ConsoleContext
from .http import api_keys, audit_log, deps, issuer, signup
from .http.conversation_stream import ConversationStreams

__all__ = ["create_app"]

_HERE = Path(__file__).parent


def _csrf_secret(settings: Settings) -> str:
    """A CSRF signing secret shared by every replica, derived from the KEK."""
    return hashlib.sha256(b"frontdoor/csrf/v1\x00" + settings.kek.encode()).hexdigest()


def _default_lookup(settings: Settings) -> Any:
    from frontdoor_tenancy.domains import TxtResolver

    return TxtResolver(nameservers=settings.nameservers(), lifetime=settings.dns_timeout.total_seconds())


def _default_fetcher(settings: Settings) -> Any:
    from frontdoor_core.outbound import OutboundPolicy, SafeFetcher, user_agent

    return SafeFetcher(OutboundPolicy(allow_http_loopback=settings.is_dev, allowlist=settings.allowlist(),
                                      user_agent=user_agent(settings.console_base_url)))


def _default_scanner_fetcher(settings: Settings) -> Any:
    from frontdoor_core.outbound import SafeFetcher
    from frontdoor_tenancy.scanner import scanner_policy, scanner_user_agent

    # Its own policy: never the outbound allowlist, never the dev loopback exception.
    agent = scanner_user_agent(console_base_url=settings.console_base_url, docs_base_url=settings.docs_base_url)
    return SafeFetcher(scanner_policy(settings.scanner_allowlist_entries(), agent=agent))


@get("/api/v1/openapi.json", include_in_schema=False, cache=False)
async def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The management API's OpenAPI document (generated from the routes)."""
    schema: dict[str, Any] = request.app.openapi_schema.to_schema()
    return schema


def _template_globals(settings: Settings) -> Callable[[JinjaTemplateEngine], None]:
    from .simulator import is_simulator

    def install(engine: JinjaTemplateEngine) -> None:
        # Every list of agents marks the dashboard's agent simulator (issue #19 §1).
        engine.engine.globals["is_simulator"] = partial(is_simulator, settings.console_base_url)
        # Findings link to the docs where the operator publishes them (the console serves none).
        engine.engine.globals["docs_base"] = settings.docs_base_url

    return install


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    txt_lookup: Any = None,
    fetcher: Any = None,
    scanner_fetcher: Any = None,
    extra_routes: list[Any] | None = None,
) -> Litestar:
    """Build the console app. Tests pass their own clock, resolver and fetcher."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = await Runtime.open(settings, clock=clock)
        ctx = ConsoleContext(
            runtime=rt,
            kek=Kek.from_env_value(settings.kek),
            txt_lookup=txt_lookup or _default_lookup(settings),
            fetcher=fetcher or _default_fetcher(settings),
            scanner_fetcher=scanner_fetcher or _default_scanner_fetcher(settings),
        )
        app.state.ctx = ctx
        app.state.pool = rt.pool
        app.state.redis = rt.redis
        app.state.conversation_streams = streams = ConversationStreams(rt.redis)  # the inbox's live streams
        await streams.start()
        try:
            yield
        finally:
            await streams.stop()
            await rt.close()

    configure_logging(level=settings.log_level, fmt=settings.log_format)
    configure_tracing("frontdoor-console", otlp_endpoint=settings.otel_exporter_otlp_endpoint)

    from .http import (
        accounts,
        admin_web,
        agents,
        billing_pages,
        dashboard,
        domains,
        funnel_pages,
        operations_api,
        scanner_pages,
        simulator_pages,
    )

    routes: list[Any] = [
        *health_routes("console"),
        signup.signup,
        api_keys.ApiKeysController,
        audit_log.audit_log,
        issuer.get_issuer,
        issuer.put_issuer,
        issuer.get_tenant,
        issuer.patch_tenant,
        issuer.rotate_key,
        issuer.list_signing_keys,
        *domains.routes,
        *agents.routes,
        *accounts.routes,
        *operations_api.routes,
        *admin_web.routes,
        dashboard.router,
        billing_pages.router,
        *billing_pages.api_routes,
        *billing_pages.public_routes,
        *scanner_pages.routes,
        funnel_pages.router,
        simulator_pages.router,
        *simulator_pages.public_routes,
        openapi_json,
        create_static_files_router(path="/static", directories=[_HERE / "static"], include_in_schema=False),
        *(extra_routes or []),
    ]
    return Litestar(
        route_handlers=routes,
        lifespan=[lifespan, metrics_lifespan("console", settings.metrics_port)],
        dependencies={"actor": Provide(deps.provide_actor)},
        # Every route, whoever adds it: viewers change nothing, owners alone manage keys and team.
        guards=[role_guard],
        exception_handlers={**problem_exception_handlers(), **billing_pages.LIMIT_HANDLERS},
        before_request=make_json_guard(("/api/",)),
        middleware=[RequestIdMiddleware, request_metrics_middleware("console"),
                    lambda app: SecurityHeadersMiddleware(app, hsts=not settings.is_dev)],
        plugins=[opentelemetry_plugin()],  # server spans named by route template; traceparent honoured
        request_max_body_size=settings.max_body_bytes,
        template_config=TemplateConfig(directory=_HERE / "templates", engine=JinjaTemplateEngine,
                                       engine_callback=_template_globals(settings)),
        csrf_config=CSRFConfig(
            secret=_csrf_secret(settings), cookie_secure=not settings.is_dev, cookie_httponly=True,
            cookie_samesite="lax", exclude=["/api/", "/healthz", "/readyz", "/billing/stripe/webhook"],
        ),
        openapi_config=OpenAPIConfig(
            title="Frontdoor management API", version="1.0.0", path="/_openapi",
            render_plugins=[JsonRenderPlugin(path="/openapi.json")],
            components=Components(security_schemes={
                "apiKey": SecurityScheme(type="http", scheme="bearer", description="A management API key (fdk_...)"),
            }),
            security=[{"apiKey": []}],
            description="Manage your Frontdoor tenant: API keys, domains, issuer settings, the audit log.",
        ),
        debug=False,
    )
