"""Server spans through Litestar's OpenTelemetry plugin, named by route template.

The plugin (OpenTelemetry's ASGI instrumentation) honours an incoming ``traceparent`` and
records method and status. Litestar's default names a span, and sets ``http.route``, from
the raw path; some paths carry bearer values (an invitation token) and spans go to an
exporter, so `route_span_details` resolves the route first and names the span
``METHOD {route template}`` (``POST /invite/{token}``), and the path and URL attributes
the instrumentation would record are replaced by the template (a query string by a
marker). A request no route matched is named by its method alone (OpenTelemetry's rule
for a span without a low-cardinality route). Headers are never recorded.
"""

from __future__ import annotations

from typing import Any

from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin
from litestar.types import Scope
from litestar.utils import normalize_path

__all__ = ["UNMATCHED_ROUTE", "opentelemetry_plugin", "route_span_details", "route_template"]

UNMATCHED_ROUTE = "[unmatched]"
"""What stands for the path of a request no route matched."""
_QUERY_MARKER = "[query]"


def route_template(scope: Scope) -> str | None:
    """The route template the app's router resolves this request to, or None.

    The router's lookup is cached, so resolving here and again in the router costs one
    lookup per distinct path.
    """
    app: Any = scope.get("app")
    router = getattr(app, "asgi_router", None)
    if router is None:
        return None
    path = str(scope.get("path", ""))
    if root_path := scope.get("root_path", ""):
        path = path.split(root_path, maxsplit=1)[-1]
    try:
        resolved = router.handle_routing(path=normalize_path(path), method=scope.get("method"))
    except Exception:  # no route (404), no method (405): named by the method alone
        return None
    return str(resolved[-1])


def route_span_details(scope: Scope) -> tuple[str, dict[str, Any]]:
    """Span name and attributes for `OpenTelemetryConfig.scope_span_details_extractor`."""
    method = str(scope.get("method", "")).strip() or str(scope["type"]).upper()
    template = route_template(scope)
    shown = template or UNMATCHED_ROUTE
    headers = dict(scope.get("headers", ()))
    host = headers.get(b"host", b"").decode("latin-1")
    attributes: dict[str, Any] = {
        "http.target": shown,
        "url.path": shown,
        "http.url": f"{scope.get('scheme', 'http')}://{host}{shown}",
    }
    if scope.get("query_string"):
        attributes["url.query"] = _QUERY_MARKER
    if template is None:
        return method, attributes
    attributes["http.route"] = template
    return f"{method} {template}", attributes


def opentelemetry_plugin() -> OpenTelemetryPlugin:
    """Litestar's OpenTelemetry plugin as every Frontdoor service configures it."""
    return OpenTelemetryPlugin(
        OpenTelemetryConfig(
            scope_span_details_extractor=route_span_details,
            exclude_spans=["receive", "send"],  # one span per request, not one per ASGI message
        )
    )
