"""OpenTelemetry: the maintained instrumentations, and a real tracer provider only when
something consumes spans.

When an OTLP endpoint is configured, `configure_tracing` installs an exporting provider
and instruments asyncpg, httpx and redis with OpenTelemetry's own instrumentations (once per
process; never a statement's parameters).

With no endpoint nothing consumes spans, so neither is done: the global provider stays
OpenTelemetry's no-op one and the libraries stay unwrapped. The wrappers are not free even
around no-op spans (issue #13: skipping them took a confirm from 16.4 to 13.6 ms of ledger
CPU, and a benchmark showed recording unexported spans at 7-9 % of the token endpoint's CPU).
An incoming ``traceparent`` still flows on: the server middleware's no-op tracer hands the
caller's span context down, log lines carry its ``trace_id``, and `inject_trace_context`
writes it on what Frontdoor sends (the perform webhook joins the agent's trace). Whoever
installs a provider later (a test's capture) calls `instrument_libraries` to get the
library spans too; the instrumentations' tracers are proxies, so it takes effect at once.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["configure_tracing", "inject_trace_context", "instrument_libraries"]

_state = {"configured": False, "instrumented": False}


def instrument_libraries() -> None:
    """Instrument asyncpg, httpx and redis (idempotent; process-wide).

    asyncpg spans carry the statement text (``db.statement``), never its parameters;
    httpx client spans also inject ``traceparent`` into outgoing requests.
    """
    if _state["instrumented"]:
        return
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    AsyncPGInstrumentor(capture_parameters=False).instrument()  # type: ignore[no-untyped-call]
    HTTPXClientInstrumentor().instrument()
    RedisInstrumentor().instrument()
    _state["instrumented"] = True


def configure_tracing(service: str, *, otlp_endpoint: str = "", extra: SpanProcessor | None = None) -> None:
    """Install an exporting tracer provider and instrument the libraries, once per process.

    Nothing is installed or instrumented without an exporter or ``extra`` (see the module
    docstring).

    Args:
        service: ``service.name`` resource attribute.
        otlp_endpoint: OTLP/HTTP collector base URL; empty disables export.
        extra: an additional span processor (tests capture spans with one).
    """
    if _state["configured"]:
        return
    if not otlp_endpoint and extra is None:
        return
    instrument_libraries()
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


def inject_trace_context(headers: MutableMapping[str, str]) -> None:
    """Add the current trace's ``traceparent`` (and ``tracestate``) to outgoing headers.

    Nothing is added outside a trace. The W3C Trace Context headers carry IDs only.
    """
    propagate.inject(headers)

