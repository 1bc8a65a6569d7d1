"""Tracing on the wire: an incoming ``traceparent`` is honoured, spans are named by route
template, log lines carry ``trace_id`` and ``request_id``, and a confirm's trace reaches
the company's perform webhook (``traceparent`` on the webhook request, W3C Trace Context).
"""

from __future__ import annotations

import json
import re
import secrets

import httpx
from opentelemetry.trace import SpanKind

from tests.integration.console.test_log_redaction import capture_logs, capture_spans
from tests.integration.ledger.conftest import Shop
from tests.integration.ledger.test_ledger_operations import proposed
from tests.support.agent import TestAgent
from tests.support.mock_web import MockWeb

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$")


def _incoming() -> tuple[str, str, str]:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, parent, f"00-{trace_id}-{parent}-01"


async def test_a_confirm_is_one_trace_from_the_agent_to_the_perform_webhook(
        shop: Shop, agent: TestAgent, web: MockWeb) -> None:
    _, tokens, op = await proposed(shop, agent)
    seen: list[dict[str, str]] = []
    hook = f"https://{shop.tenant.slug}.shop.example/webhooks/frontdoor"

    async def recording(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.headers))
        return await shop.receiver(request)

    web.handle(hook, recording)
    trace_id, parent, header = _incoming()
    url = shop.url(op["operation_id"], "confirm")
    token = tokens["access_token"]
    with capture_spans() as spans, capture_logs() as logs:
        r = await shop.ledger.post(url, content=json.dumps({"revision": op["revision"], "approved_by": "user"}).encode(),
                                   headers={"Authorization": f"DPoP {token}", "traceparent": header,
                                            "DPoP": agent.dpop("POST", url, token=token, iat=shop.now()),
                                            "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "succeeded"
    # the ledger's server span continues the agent's trace, named by the route template
    server = [s for s in spans.spans if s.kind == SpanKind.SERVER and format(s.context.trace_id, "032x") == trace_id]
    assert [s.name for s in server] == ["POST /{slug}/operations/{operation_id}/confirm"]
    assert server[0].parent is not None and format(server[0].parent.span_id, "016x") == parent
    assert server[0].attributes is not None and server[0].attributes["http.route"] == (
        "/{slug}/operations/{operation_id}/confirm")
    assert op["operation_id"] not in spans.text() and shop.tenant.slug not in server[0].name
    # the perform webhook carries the same trace, from the delivery span
    perform = [h for h in seen if "traceparent" in h]
    assert perform, seen
    m = _TRACEPARENT.match(perform[-1]["traceparent"])
    assert m is not None and m.group(1) == trace_id
    deliver = [s for s in spans.spans if s.name == "webhook.deliver"]
    assert deliver and format(deliver[-1].context.trace_id, "032x") == trace_id
    assert m.group(2) == format(deliver[-1].context.span_id, "016x")
    # database statements are spans of the same trace (the asyncpg instrumentation)
    assert any(s.attributes and s.attributes.get("db.system") == "postgresql"
               and format(s.context.trace_id, "032x") == trace_id for s in spans.spans)
    # and the request's log lines carry the trace and the request ID
    lines = [json.loads(line) for line in logs.getvalue().splitlines() if line.startswith("{")]
    traced = [line for line in lines if line.get("trace_id") == trace_id]
    assert traced, lines[-5:]
    assert all(line.get("request_id") == r.headers["x-request-id"] for line in traced
               if line.get("event") != "webhook_attempt" and "request_id" in line)
    assert any(line.get("request_id") == r.headers["x-request-id"] for line in traced)


async def test_an_unmatched_path_is_named_by_its_method_and_never_recorded(shop: Shop) -> None:
    secret_path = "/" + secrets.token_urlsafe(24)
    trace_id, _, header = _incoming()
    with capture_spans() as spans:
        r = await shop.ledger.get(secret_path + "?code=" + secrets.token_urlsafe(8), headers={"traceparent": header})
    assert r.status_code == 404
    server = [s for s in spans.spans if s.kind == SpanKind.SERVER and format(s.context.trace_id, "032x") == trace_id]
    assert [s.name for s in server] == ["GET"]
    assert secret_path not in spans.text() and "code=" not in spans.text()


async def test_without_traceparent_a_request_starts_its_own_trace(shop: Shop) -> None:
    with capture_spans() as spans:
        r = await shop.ledger.get("/healthz")
    assert r.status_code == 200
    server = [s for s in spans.spans if s.kind == SpanKind.SERVER]
    assert [s.name for s in server] == ["GET /healthz"]
    assert server[0].parent is None
