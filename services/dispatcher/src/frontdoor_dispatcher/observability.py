"""Tracing in the Celery worker: each prefork child installs the tracer provider (OTLP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set), the asyncpg/httpx/redis instrumentations and
OpenTelemetry's Celery instrumentation, so every delivery task is a span and its
``webhook.deliver`` spans (with the ``traceparent`` sent to the receiver) are exported.

Connected from `celery_app`; done after the fork, as the Celery instrumentation requires
(a provider's exporter thread does not survive a fork).
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init
from frontdoor_core.settings import Settings
from frontdoor_core.telemetry import configure_tracing

__all__ = ["connect"]

_state = {"connected": False}


def connect(settings: Settings) -> None:
    """Instrument each worker process once it has forked."""
    if _state["connected"]:
        return

    @worker_process_init.connect(weak=False)
    def _instrument(**_: Any) -> None:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        configure_tracing("frontdoor-dispatcher", otlp_endpoint=settings.otel_exporter_otlp_endpoint)
        CeleryInstrumentor().instrument()  # type: ignore[no-untyped-call]

    _state["connected"] = True
