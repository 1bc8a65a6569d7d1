"""No secret in logs or spans over a full console flow.

Capture: the session-scoped console app called ``configure_logging`` when it was built,
with ``sys.stdout`` of that moment, so ``capfd`` alone would miss its lines (they go to
whatever capture object was current then). The test therefore re-runs
``configure_logging(stream=buffer)`` (the same pipeline, a different sink) for its
duration and restores the previous configuration afterwards; ``capfd`` still collects
anything written to the process's stdout/stderr by another route, and a span processor
collects every span. Probe lines logged through structlog and stdlib logging prove the
capture sees log lines and that they pass the redaction processor: without redaction
the probes' secrets would show up and the test would fail.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import structlog
from frontdoor_core.logging import REDACTED, configure_logging
from frontdoor_core.settings import Settings
from frontdoor_core.telemetry import instrument_libraries
from litestar import Request, get
from litestar.testing import AsyncTestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from tests.conftest import unique
from tests.integration.conftest import TenantHandle, sign_up
from tests.support.clock import ShiftableClock


class _SpanCollector(SpanProcessor):
    """Keeps the spans that end while ``active`` (processors cannot be removed once added)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.active = True

    def on_end(self, span: ReadableSpan) -> None:
        if self.active:
            self.spans.append(span)

    def text(self) -> str:
        out = []
        for s in self.spans:
            out.append(s.name)
            out.append(json.dumps(dict(s.attributes or {}), default=str))
            for e in s.events:
                out.append(e.name + json.dumps(dict(e.attributes or {}), default=str))
            if s.status.description:
                out.append(s.status.description)
        return "\n".join(out)


@contextmanager
def restored_logging() -> Iterator[None]:
    """Put the process's logging configuration back as it was (other tests share it)."""
    saved = structlog.get_config()
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


@contextmanager
def capture_logs() -> Iterator[io.StringIO]:
    """Route structlog and stdlib logging to a buffer, through the app's own pipeline."""
    buf = io.StringIO()
    with restored_logging():
        configure_logging(level="debug", fmt="json", stream=buf)
        yield buf


@contextmanager
def capture_spans() -> Iterator[_SpanCollector]:
    """Record every span, the libraries' included (with no exporter they are not instrumented)."""
    instrument_libraries()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # no exporter configured: install one to watch
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    collector = _SpanCollector()
    provider.add_span_processor(collector)
    try:
        yield collector
    finally:
        collector.active = False


def _key_secret(api_key: str) -> str:
    """The part of ``fdk_<prefix>_<secret+checksum>`` that grants access."""
    return api_key.split("_", 2)[2]


def _assert_clean(text: str, secrets_: dict[str, str]) -> None:
    leaked = [name for name, value in secrets_.items() if value in text]
    assert not leaked, f"secrets in logs/spans: {leaked}"


def _probe_lines(buf: io.StringIO, event: str) -> list[dict[str, Any]]:
    lines = []
    for line in buf.getvalue().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("event", "").startswith(event):
            lines.append(obj)
    return lines


async def test_full_flow_logs_and_spans_hold_no_secret(
    console: AsyncTestClient[Any], capfd: pytest.CaptureFixture[str]
) -> None:
    password = f"correct horse battery staple {secrets.token_hex(6)}"
    bogus_token = "bogus" + secrets.token_urlsafe(24)
    bogus_fdk = "fdk_AAAAAAAA_" + secrets.token_hex(24)
    bogus_jwt = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0." + secrets.token_urlsafe(32)
    statuses: list[int] = []
    with capture_spans() as spans, capture_logs() as buf:
        # sign up, with a password only this test knows
        owner = await sign_up(console, password=password)
        auth = owner.auth
        # a second key, used for calls, then revoked and used again (401)
        r = await console.post("/api/v1/api-keys", json={"name": "ci"}, headers=auth)
        assert r.status_code == 201, r.text
        second = r.json()
        key2 = {"Authorization": f"Bearer {second['api_key']}"}
        for path in (
            "/api/v1/api-keys",
            "/api/v1/audit-log",
            "/api/v1/issuer",
            "/api/v1/tenant",
            "/api/v1/signing-keys",
            "/api/v1/domains",
        ):
            r = await console.get(path, headers=key2)
            assert r.status_code == 200, (path, r.text)
        r = await console.get("/api/v1/issuer", headers=key2)
        r = await console.put("/api/v1/issuer", json=r.json()["settings"], headers=key2)
        statuses.append(r.status_code)
        statuses.append(
            (
                await console.post("/api/v1/domains", json={"domain": f"{unique('d')}.example.com"}, headers=key2)
            ).status_code
        )
        statuses.append((await console.post("/api/v1/signing-keys/rotate", headers=key2)).status_code)
        assert (await console.delete(f"/api/v1/api-keys/{second['id']}", headers=auth)).status_code == 200
        refused = await console.get("/api/v1/api-keys", headers=key2)
        assert refused.status_code == 401
        # failed authentication with bogus credentials in every shape
        for header in (
            f"Bearer {bogus_token}",
            f"Bearer {bogus_fdk}",
            f"Bearer {bogus_jwt}",
            f"DPoP {bogus_token}",
            bogus_token,
        ):
            r = await console.get("/api/v1/audit-log", headers={"Authorization": header})
            assert r.status_code == 401
            assert bogus_token not in r.text and bogus_fdk not in r.text
        # bodies carrying the password: taken email (409), malformed, unknown field, wrong media type,
        # and one PostgreSQL cannot store (a crash today: see test_bad_input) - none may log it
        body = {"email": owner.email, "password": password, "organization_name": "Copy", "slug": unique("cp-")}
        statuses.append((await console.post("/api/v1/signup", json=body)).status_code)
        statuses.append(
            (
                await console.post(
                    "/api/v1/signup", content=json.dumps(body)[:-2], headers={"content-type": "application/json"}
                )
            ).status_code
        )
        statuses.append((await console.post("/api/v1/signup", json={**body, "extra": password})).status_code)
        statuses.append(
            (
                await console.post("/api/v1/signup", content=json.dumps(body), headers={"content-type": "text/plain"})
            ).status_code
        )
        nul = {**body, "email": f"{unique()}@example.com", "slug": unique("nul-"), "organization_name": "Org\u0000"}
        statuses.append((await console.post("/api/v1/signup", json=nul)).status_code)
        # probes: a line the redaction processor must clean, through structlog and stdlib logging
        structlog.get_logger("frontdoor.test").warning(
            "redaction_probe",
            api_key=owner.api_key,
            password=password,
            note=f"retrying with Authorization: Bearer {bogus_token} and key {second['api_key']}",
            request={"headers": {"Authorization": f"Bearer {owner.api_key}", "Cookie": f"s={bogus_token}"}},
        )
        logging.getLogger("frontdoor.test").warning("redaction_probe_stdlib %s", f"Bearer {bogus_token}")
    captured = capfd.readouterr()

    assert statuses[:3] == [200, 201, 201]
    assert statuses[3:7] == [409, 400, 422, 415]
    logs = buf.getvalue()
    probes = _probe_lines(buf, "redaction_probe")
    assert len(probes) == 2, logs[-2000:]  # the capture sees structlog and stdlib lines
    assert probes[0]["api_key"] == REDACTED and probes[0]["password"] == REDACTED
    assert REDACTED in probes[0]["note"] and REDACTED in probes[1]["event"]
    assert len(spans.spans) > 20  # every request and statement above made spans
    text = "\n".join([logs, captured.out, captured.err, spans.text()])
    _assert_clean(
        text,
        {
            "password": password,
            "owner api key": _key_secret(owner.api_key),
            "second api key": _key_secret(second["api_key"]),
            "bogus bearer token": bogus_token,
            "bogus fdk key": _key_secret(bogus_fdk),
            "bogus jwt signature": bogus_jwt.rsplit(".", 1)[1],
        },
    )


async def test_an_unexpected_error_is_logged_by_the_app_without_the_secret_it_carries(
    settings: Settings,
    migrated: str,
    clock: ShiftableClock,
    console: AsyncTestClient[Any],
    tenant: TenantHandle,
) -> None:
    """An exception whose message quotes a key and a bearer token: its 500 log line is masked.

    Uses its own app instance (the same factory) with one extra route, so the lines are
    written by the app's own thread through the crash handler, not by the test.
    """
    from frontdoor_console.app import create_app

    bogus_token = "tok" + secrets.token_urlsafe(24)

    @get("/test/boom", sync_to_thread=False)
    def boom(request: Request[Any, Any, Any]) -> None:
        structlog.get_logger("frontdoor.test").info(
            "boom_handler",
            authorization=request.headers["authorization"],
            note="calling upstream with " + request.headers["authorization"],
        )
        raise RuntimeError(f"upstream refused {tenant.api_key} (Authorization: Bearer {bogus_token})")

    with restored_logging():  # create_app configures logging for the process
        app = create_app(settings, clock=clock, extra_routes=[boom])
        async with AsyncTestClient(app, base_url="https://console.frontdoor.test") as client:
            with capture_logs() as buf:
                r = await client.get("/test/boom", headers={"Authorization": f"Bearer {tenant.api_key}"})
    assert r.status_code == 500
    assert tenant.api_key not in r.text and bogus_token not in r.text
    crash = [
        line for line in _probe_lines(buf, "unhandled_exception") if line.get("request_id") == r.headers["x-request-id"]
    ]
    assert len(crash) == 1, buf.getvalue()[-2000:]
    assert "RuntimeError: upstream refused" in crash[0]["exception"]  # the trace is there, masked
    assert REDACTED in crash[0]["exception"]
    handler = _probe_lines(buf, "boom_handler")
    assert len(handler) == 1 and handler[0]["authorization"] == REDACTED
    _assert_clean(buf.getvalue(), {"api key": _key_secret(tenant.api_key), "bearer token": bogus_token})
