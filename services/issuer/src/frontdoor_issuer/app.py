"""The issuer: each tenant's PAP authorization server under ``{base}/{slug}``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from frontdoor_core.clock import Clock
from frontdoor_core.logging import configure_logging
from frontdoor_core.outbound import OutboundPolicy, SafeFetcher
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_core.telemetry import configure_tracing
from frontdoor_httpkit import (
    RequestIdMiddleware,
    SecurityHeadersMiddleware,
    TracingMiddleware,
    health_routes,
)
from frontdoor_identity import AgentDirectory
from frontdoor_sessions import IssuerKeys, NonceSource, SessionGrant
from frontdoor_tenancy.credentials.key_encryption import Kek
from litestar import Litestar, Request, Response
from litestar.exceptions import HTTPException, NotFoundException

from .context import IssuerContext, nonce_secret
from .http import discovery, feedback, introspect, token

__all__ = ["create_app"]


def _protocol_error(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, str]]:
    """Protocol surfaces answer ``{"error", "error_description"}`` (RFC 6749 §5.2 shape)."""
    if isinstance(exc, NotFoundException):
        return discovery.not_found()
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        return Response({"error": "invalid_request", "error_description": "The request is not valid."},
                        status_code=exc.status_code, headers={"Cache-Control": "no-store"})
    import structlog

    structlog.get_logger("frontdoor.issuer").error("unhandled_exception", exc_info=exc)
    return Response({"error": "server_error", "error_description": "Something went wrong on our side."},
                    status_code=500, headers={"Cache-Control": "no-store"})


def create_app(settings: Settings, *, clock: Clock | None = None, fetcher: Any = None) -> Litestar:
    """Build the issuer app."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        rt = await Runtime.open(settings, clock=clock)
        the_fetcher = fetcher or SafeFetcher(OutboundPolicy(allow_http_loopback=settings.is_dev,
                                                           allowlist=settings.allowlist()))
        directory = AgentDirectory(the_fetcher, rt.clock)
        keys = IssuerKeys(Kek.from_env_value(settings.kek))
        grant = SessionGrant(pool=rt.pool, redis=rt.redis, directory=directory, keys=keys,
                             nonces=NonceSource(nonce_secret(settings)), clock=rt.clock)
        app.state.ctx = IssuerContext(runtime=rt, keys=keys, grant=grant, directory=directory)
        app.state.pool = rt.pool
        app.state.redis = rt.redis
        try:
            yield
        finally:
            await rt.close()

    configure_logging(level=settings.log_level, fmt=settings.log_format)
    configure_tracing("frontdoor-issuer", otlp_endpoint=settings.otel_exporter_otlp_endpoint)
    return Litestar(
        route_handlers=[*health_routes("issuer"), *discovery.routes, token.token, introspect.introspection,
                        feedback.feedback],
        lifespan=[lifespan],
        exception_handlers={HTTPException: _protocol_error, Exception: _protocol_error},
        middleware=[RequestIdMiddleware, TracingMiddleware,
                    lambda app: SecurityHeadersMiddleware(app, hsts=not settings.is_dev)],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=None,
        debug=False,
    )
