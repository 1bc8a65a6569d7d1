"""The redaction processor: sensitive keys at any depth, credential shapes inside free text."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from frontdoor_core.logging import REDACTED, configure_logging, redact, redact_processor

API_KEY = "fdk_7Hq2ZcL0_4XbQ9vLk2mN8pR3sT6wY1zA5cE7gJ0hK4nP9qS2uV5xZ8bD3fkQ91cZ"
JWT = (
    "eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCJ9.eyJzdWIiOiJ1c2VyLTEiLCJzY29wZSI6InBvcHB5OnJlYWQifQ."
    "MEUCIQDx0zK4n2Vv8b1yQ3sZ5c7u9w1y3a5c7e9g1i3k5m7o9q"
)
WHSEC = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
ARGON = "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG"


@pytest.mark.parametrize(
    "key",
    [
        "authorization",
        "Authorization",
        "AUTHORIZATION",
        "proxy-authorization",
        "DPoP",
        "dpop",
        "cookie",
        "Cookie",
        "set-cookie",
        "password",
        "new_password",
        "passwd",
        "client_assertion",
        "assertion",
        "code",
        "Code",
        "refresh_token",
        "access_token",
        "id_token",
        "token",
        "api_key",
        "api-key",
        "apiKey",
        "x-api-key",
        "secret",
        "client_secret",
        "webhook_secret",
        "code_verifier",
        "user_code",
        "device_code",
        "kek",
        "private_key",
        "signature",
        "credential",
        "session_key",
        "otp",
    ],
)
@pytest.mark.parametrize(
    "value",
    ["plain-looking value", 12345, {"nested": "x"}, ["a", "b"], None, b"raw"],
    ids=["str", "int", "dict", "list", "none", "bytes"],
)
def test_sensitive_keys_are_replaced_whatever_the_value(key: str, value: Any) -> None:
    assert redact({key: value}) == {key: REDACTED}
    assert redact(value, key) == REDACTED


def test_sensitive_keys_are_replaced_at_any_depth() -> None:
    event = {
        "request": {
            "headers": {"Authorization": "Bearer abc", "Accept": "application/json"},
            "body": {"grant_type": "refresh_token", "refresh_token": "rt-123", "client_id": "c1"},
        },
        "attempts": [{"password": "hunter2", "user": "ann"}, [{"client_secret": "s3"}]],
        "ok": True,
    }
    assert redact(event) == {
        "request": {
            "headers": {"Authorization": REDACTED, "Accept": "application/json"},
            "body": {"grant_type": "refresh_token", "refresh_token": REDACTED, "client_id": "c1"},
        },
        "attempts": [{"password": REDACTED, "user": "ann"}, [{"client_secret": REDACTED}]],
        "ok": True,
    }


@pytest.mark.parametrize(
    ("secret", "shape"),
    [
        (JWT, "jwt"),
        (f"Bearer {JWT}", "bearer jwt"),
        ("Bearer xyzABC123._~+/=-opaque", "bearer opaque"),
        ("bearer lowercase-token-1234", "bearer lowercase"),
        ("DPoP h480djs93hd8-token", "dpop scheme"),
        ("Basic dXNlcjpwYXNzd29yZA==", "basic"),
        (API_KEY, "api key"),
        (WHSEC, "webhook secret"),
        (ARGON, "argon2 hash"),
    ],
)
def test_credential_shapes_are_masked_inside_free_text(secret: str, shape: str) -> None:
    text = f"upstream said no to {secret} at https://api.example.com/v1 (retry 2)"
    out = redact(text)
    assert out.startswith("upstream said no to ") and out.endswith(" at https://api.example.com/v1 (retry 2)"), out
    assert REDACTED in out, shape
    token = secret.rsplit(maxsplit=1)[-1]  # with a scheme, the credential is what follows it
    assert token not in out and token[-12:] not in out, out
    assert redact(text.encode()) == out  # bytes too


def test_every_occurrence_is_masked() -> None:
    out = redact(f"{API_KEY} then {API_KEY}; {JWT},{WHSEC}")
    assert out == f"{REDACTED} then {REDACTED}; {REDACTED},{REDACTED}"


def test_masking_applies_to_strings_in_lists_and_under_harmless_keys() -> None:
    out = redact({"note": f"key {API_KEY}", "args": ["x", f"Authorization: Bearer {JWT}"], "t": (WHSEC, 1)})
    assert out["note"] == f"key {REDACTED}"
    assert out["args"][0] == "x" and out["args"][1].startswith("Authorization: ") and JWT not in out["args"][1]
    assert out["t"] == [REDACTED, 1]


def test_harmless_values_are_untouched() -> None:
    event = {
        "event": "api_key.created",
        "tenant_id": "ten_01JD7Z8Q4W5X6Y7Z8A9B0C1D2E",
        "request_id": "req_4f2a9c0d1e2b3a45",
        "key_id": "key_01JD7Z8Q4W5X6Y7Z8A9B0C1D2E",
        "prefix": "7Hq2ZcL0",
        "path": "/api/v1/api-keys/key_01JD7Z8Q4W5X6Y7Z8A9B0C1D2E",
        "status": 201,
        "status_code": 201,
        "error_code": "slug_taken",
        "error": "invalid_grant",
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "code_challenge_method": "S256",
        "duration_ms": 3.25,
        "ok": True,
        "missing": None,
        "scopes": ["poppy:read", "poppy:write"],
        "message": "Bearer auth failed for tenant acme; a short word like fdk_ or whsec_ alone is fine",
        "url": "https://issuer.frontdoor.test/acme/.well-known/oauth-authorization-server",
    }
    assert redact(event) == event


def test_processor_masks_the_event_text_and_judges_other_members_by_name() -> None:
    out = redact_processor(
        None,
        "info",
        {
            "event": f"login with Bearer {JWT}",
            "password": "pw",
            "detail": f"key {API_KEY}",
            "count": 2,
        },
    )
    assert JWT not in out["event"] and out["event"].startswith("login with ") and REDACTED in out["event"]
    assert out["password"] == REDACTED and out["detail"] == f"key {REDACTED}" and out["count"] == 2


@pytest.fixture
def log_buffer() -> Iterator[io.StringIO]:
    """The real pipeline writing into a buffer; the previous configuration comes back afterwards."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    buf = io.StringIO()
    try:
        yield buf
    finally:
        structlog.contextvars.clear_contextvars()
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_configured_pipeline_redacts_structlog_stdlib_context_and_tracebacks(log_buffer: io.StringIO, fmt: str) -> None:
    configure_logging(level="debug", fmt=fmt, stream=log_buffer)
    structlog.contextvars.bind_contextvars(request_id="req_12345678", authorization=f"Bearer {JWT}")
    log = structlog.get_logger("frontdoor.test")
    log.info("token_request", client_assertion=JWT, api_key=API_KEY, note=f"used {API_KEY}", tenant_id="ten_x")
    try:
        raise RuntimeError(f"upstream refused {API_KEY} and {WHSEC}")
    except RuntimeError:
        log.exception("structlog_crash")
        logging.getLogger("frontdoor.stdlib").exception("stdlib_crash with Bearer %s", JWT)
    logging.getLogger("frontdoor.stdlib").warning("stdlib_line %s", f"api key {API_KEY}")
    out = log_buffer.getvalue()
    for event in ("token_request", "structlog_crash", "stdlib_crash", "stdlib_line", "RuntimeError: upstream refused"):
        assert event in out, out
    assert "req_12345678" in out and "ten_x" in out  # context and harmless values survive
    for secret in (API_KEY, JWT, WHSEC, JWT.split(".")[2], API_KEY[13:]):
        assert secret not in out, secret
    if fmt == "json":
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        first = next(x for x in lines if x["event"] == "token_request")
        assert first["authorization"] == first["client_assertion"] == first["api_key"] == REDACTED


def test_log_level_filters(log_buffer: io.StringIO) -> None:
    configure_logging(level="warning", stream=log_buffer)
    structlog.get_logger("t").info("quiet_line")
    structlog.get_logger("t").warning("loud_line")
    assert "loud_line" in log_buffer.getvalue() and "quiet_line" not in log_buffer.getvalue()
