"""structlog JSON logging with request context (``request_id``, ``trace_id``) and a redaction processor.

The redaction processor runs before any renderer, so no sink sees a credential:
values under sensitive keys are replaced whatever their shape, and credential-shaped
substrings (JWTs, ``Bearer``/``DPoP`` values, Frontdoor API keys, webhook secrets) are
masked inside any other string.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog
from opentelemetry import trace

__all__ = ["REDACTED", "add_trace_ids", "configure_logging", "get_logger", "redact", "redact_processor"]

REDACTED = "[redacted]"

_SENSITIVE_KEY = re.compile(
    r"(authorization|dpop|cookie|passw|secret|assertion|token|api[_-]?key|^code$|code_verifier"
    r"|private|kek|credential|session_key|signature|otp|user_code|device_code)",
    re.IGNORECASE,
)
_SENSITIVE_VALUE = [
    re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"),  # JWS compact
    re.compile(r"(?i)\b(bearer|dpop|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bfdk_[A-Za-z0-9_]{8,}"),
    re.compile(r"\bwhsec_[A-Za-z0-9+/=]{8,}"),
    re.compile(r"\$argon2id?\$[^\s\"']+"),
]


def _mask(text: str) -> str:
    for pattern in _SENSITIVE_VALUE:
        text = pattern.sub(REDACTED, text)
    return text


def redact(value: Any, key: str | None = None) -> Any:
    """Return ``value`` with secrets removed (recursively through mappings and lists)."""
    if key is not None and _SENSITIVE_KEY.search(key):
        return REDACTED
    if isinstance(value, str):
        return _mask(value)
    if isinstance(value, bytes):
        return _mask(value.decode("utf-8", "replace"))
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def redact_processor(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor applying `redact` to every key of the event."""
    for k in list(event_dict):
        if k == "event":
            event_dict[k] = redact(event_dict[k])
        else:
            event_dict[k] = redact(event_dict[k], k)
    return event_dict


def add_trace_ids(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor adding the current span's ``trace_id`` and ``span_id`` (hex).

    Alongside the ``request_id`` the HTTP services bind, a log line can be found from its
    trace and the trace from the line. Outside a trace nothing is added.
    """
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        event_dict.setdefault("trace_id", format(ctx.trace_id, "032x"))
        event_dict.setdefault("span_id", format(ctx.span_id, "016x"))
    return event_dict


class _CurrentStdout:
    """``sys.stdout`` as it is when a line is written, not when logging was configured.

    A process may replace ``sys.stdout`` after start-up (test runners capture it per test and
    close the capture afterwards); binding the object of the moment would write to a closed file.
    """

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def configure_logging(*, level: str = "info", fmt: str = "json", stream: Any = None) -> None:
    """Route structlog and stdlib logging through one redacting pipeline (to ``stream``, else stdout)."""
    stream = stream if stream is not None else _CurrentStdout()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        add_trace_ids,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        redact_processor,
    ]
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("asyncio", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel("WARNING")


def get_logger(name: str | None = None) -> Any:
    """A structlog logger (bind context with ``structlog.contextvars``)."""
    return structlog.get_logger(name)
