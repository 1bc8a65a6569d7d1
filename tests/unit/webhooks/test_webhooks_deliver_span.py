"""The delivery span without a tracer provider: no span is made per attempt, yet the request
carries exactly the ``traceparent`` the no-op tracer's span would have given it (a caller's
trace flows on to the receiver, W3C Trace Context)."""

from __future__ import annotations

from datetime import datetime

import pytest
from frontdoor_core.telemetry import inject_trace_context
from frontdoor_webhooks import delivery
from frontdoor_webhooks.delivery import ClaimedMessage
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

CLAIMED = ClaimedMessage(id="msg_1", tenant_id="ten_1", endpoint_id="ep_1", event_type="operation.perform",
                         body="{}", purpose="perform", operation_id="op_1", attempt=1,
                         locked_until=datetime(2026, 1, 1), url="https://hooks.test/")
CALLER = SpanContext(trace_id=0x0AF7651916CD43DD8448EB211C80319C, span_id=0xB7AD6B7169203331, is_remote=True,
                     trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _headers_within(span_cm: object) -> dict[str, str]:
    headers: dict[str, str] = {}
    with span_cm as span:  # type: ignore[attr-defined]
        span.set_attribute("http.response.status_code", 200)  # a no-op, never an error
        inject_trace_context(headers)
    return headers


@pytest.mark.parametrize("caller", [CALLER, None])
def test_without_a_provider_the_request_carries_what_the_no_op_span_would_have(
        monkeypatch: pytest.MonkeyPatch, caller: SpanContext | None) -> None:
    monkeypatch.setattr(delivery.trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    no_op = trace.NoOpTracer()

    def run(make: object) -> dict[str, str]:
        if caller is None:
            return _headers_within(make())  # type: ignore[operator]
        with trace.use_span(NonRecordingSpan(caller)):
            return _headers_within(make())  # type: ignore[operator]

    fast = run(lambda: delivery._deliver_span(CLAIMED))
    reference = run(lambda: no_op.start_as_current_span("webhook.deliver"))

    assert fast == reference
    if caller is None:
        assert "traceparent" not in fast
    else:
        assert fast["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_with_a_provider_a_span_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    class Provider(trace.TracerProvider):
        def get_tracer(self, *args: object, **kwargs: object) -> trace.Tracer:
            return trace.NoOpTracer()

    monkeypatch.setattr(delivery.trace, "get_tracer_provider", lambda: Provider())
    made: list[str] = []
    monkeypatch.setattr(delivery._tracer, "start_as_current_span",
                        lambda name, **kw: made.append(name) or trace.NoOpTracer().start_as_current_span(name))

    _headers_within(delivery._deliver_span(CLAIMED))

    assert made == ["webhook.deliver"]
