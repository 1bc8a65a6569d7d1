"""`frontdoor_core.telemetry`: the libraries are wrapped only when something consumes spans.

Each case runs in a fresh interpreter: instrumentation is process-wide, and a test worker's
other tests (span captures) instrument it for good.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

_PROBE = textwrap.dedent("""
    import asyncpg.connection, httpx, redis.asyncio.client
    from frontdoor_core import telemetry
    from opentelemetry import trace

    def wrapped(fn):
        return hasattr(fn, "__wrapped__")

    telemetry.configure_tracing("probe", otlp_endpoint=ENDPOINT)
    print(wrapped(asyncpg.connection.Connection.execute),
          wrapped(httpx.AsyncHTTPTransport.handle_async_request),
          wrapped(redis.asyncio.client.Redis.execute_command),
          type(trace.get_tracer_provider()).__name__)
""")


def _probe(endpoint: str) -> list[str]:
    code = f"ENDPOINT = {endpoint!r}\n" + _PROBE
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def test_without_an_exporter_nothing_is_wrapped_and_the_provider_stays_no_op() -> None:
    asyncpg_, httpx_, redis_, provider = _probe("")
    assert (asyncpg_, httpx_, redis_) == ("False", "False", "False")
    assert provider != "TracerProvider"


def test_with_an_exporter_the_libraries_are_instrumented() -> None:
    # The endpoint is never reached: the batch processor exports in the background, after the probe.
    asyncpg_, httpx_, redis_, provider = _probe("http://127.0.0.1:9")
    assert (asyncpg_, httpx_, redis_) == ("True", "True", "True")
    assert provider == "TracerProvider"
