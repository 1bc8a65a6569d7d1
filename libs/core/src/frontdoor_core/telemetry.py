"""OpenTelemetry: a real tracer provider only when something consumes spans.

With no OTLP endpoint the global provider stays OpenTelemetry's no-op one, so the spans
our middleware and database layer open cost next to nothing (a benchmark showed
recording unexported spans at 7-9 % of the token endpoint's CPU). Module-level tracers
are proxies: a provider installed later (an exporter, a test's capture) takes effect.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["configure_tracing"]

_state = {"configured": False}


def configure_tracing(service: str, *, otlp_endpoint: str = "", extra: SpanProcessor | None = None) -> None:
    """Install the tracer provider once per process.

    Args:
        service: ``service.name`` resource attribute.
        otlp_endpoint: OTLP/HTTP collector base URL; empty disables export.
        extra: an additional span processor (tests capture spans with one).
    """
    if _state["configured"]:
        return
    if not otlp_endpoint and extra is None:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces"))
        )
    if extra is not None:
        provider.add_span_processor(extra)
    trace.set_tracer_provider(provider)
    _state["configured"] = True
