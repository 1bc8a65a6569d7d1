"""Request metrics per route template, with Litestar's Prometheus middleware.

``frontdoor_requests_total``, ``frontdoor_request_duration_seconds`` and
``frontdoor_requests_error_total`` (5xx) are labelled by method, route template
(``path``: ``/{slug}/oauth/token``, never the raw path, which may carry a token), status
code and service (``app_name``). The middleware runs on matched routes. Nothing is served
here: ``/metrics`` is on the internal listener (`frontdoor_core.metrics.metrics_listener`),
never on the public app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

from frontdoor_core.metrics import metrics_listener, sample_pool
from litestar import Litestar
from litestar.middleware.base import DefineMiddleware
from litestar.plugins.prometheus import PrometheusConfig, PrometheusMiddleware
from litestar.types import Receive, Scope, Send

__all__ = ["Observer", "Sampler", "lean_route_observer", "metrics_lifespan", "request_metrics_middleware"]


def _config(service: str) -> PrometheusConfig:
    return PrometheusConfig(app_name=service, prefix="frontdoor", group_path=True)


def request_metrics_middleware(service: str) -> DefineMiddleware:
    """The middleware counting and timing this service's requests."""
    return _config(service).middleware


Observer = Callable[[str, str, int, float], None]
"""``(method, route template, status, seconds)`` of one request answered outside Litestar."""


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:  # pragma: no cover - never called
    raise RuntimeError("not an app")


def lean_route_observer(service: str) -> Observer:
    """Record requests a lean ASGI route answers in the very metrics of `request_metrics_middleware`
    (same names, same labels, the route template as Litestar's ``path_template`` writes it: ``/{slug}/oauth/token``),
    through the middleware's own metric accessors, so dashboards see one series per route."""
    middleware = PrometheusMiddleware(app=_nothing, config=_config(service))

    def observe(method: str, template: str, status: int, seconds: float) -> None:
        labels: dict[str, str | int | float] = {"method": method, "path": template, "status_code": status,
                                                "app_name": service}
        values = [*labels.values()]
        if status >= 500:
            middleware.requests_error_count(labels).labels(*values).inc()
        middleware.request_count(labels).labels(*values).inc()
        middleware.request_time(labels).labels(*values).observe(seconds)

    return observe


Sampler = Callable[[Litestar], Awaitable[None]]
"""Records gauges from an app's state (its pool, a backlog), every sampling interval."""


def metrics_lifespan(service: str, port: int, *, samplers: Sequence[Sampler] = ()) -> Callable[
        [Litestar], AbstractAsyncContextManager[None]]:
    """A lifespan serving ``/metrics`` on the internal ``port`` (0: off) while the app runs.

    List it after the lifespan that opens ``app.state.pool``: the pool's connections are
    sampled, then each of ``samplers``.
    """

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async def pool() -> None:
            sample_pool(app.state.pool, service)

        bound: list[Callable[[], Awaitable[None]]] = [pool, *(partial(s, app) for s in samplers)]
        async with metrics_listener(port, samplers=bound):
            yield

    return lifespan
