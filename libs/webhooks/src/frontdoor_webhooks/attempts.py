"""Delivery attempts: one row per try, what was sent and what came back.

Rows hold what a company needs to debug its receiver (status, error class, timing, the
start of the answer, the request headers) and never a secret: ``webhook-signature`` is
stored redacted, and the body sent is the message's, not copied here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import asyncpg
import msgspec

from .signing import SIGNATURE_HEADER

__all__ = ["EXCERPT_LIMIT", "Attempt", "excerpt", "list_attempts", "redacted_headers"]

EXCERPT_LIMIT = 2048
"""Most characters of a response body kept on an attempt."""

_COLUMNS = ("id, tenant_id, message_id, endpoint_id, attempt, url, started_at, duration_ms, response_status,"
            " error_class, response_excerpt, request_headers, next_attempt_at")


class Attempt(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery attempt.

    Attributes:
        attempt: 1 for the first try of the message, then 2, 3...
        response_status: The HTTP status, None when no answer came.
        error_class: Why it failed (`ErrorClass` values), None on success.
        response_excerpt: The start of the answer's body (or of the error).
        request_headers: The headers sent, ``webhook-signature`` redacted.
        next_attempt_at: When the message is tried again; None when it is not.
    """

    id: str
    tenant_id: str
    message_id: str
    endpoint_id: str
    attempt: int
    url: str
    started_at: datetime
    duration_ms: int
    response_status: int | None
    error_class: str | None
    response_excerpt: str
    request_headers: dict[str, str]
    next_attempt_at: datetime | None


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with every signature replaced, fit to store or show."""
    return {name: ("[redacted]" if name.lower() == SIGNATURE_HEADER else value) for name, value in headers.items()}


def excerpt(body: bytes | str) -> str:
    """The first `EXCERPT_LIMIT` characters, undecodable bytes replaced."""
    text = body if isinstance(body, str) else body[: EXCERPT_LIMIT * 4].decode("utf-8", errors="replace")
    return text[:EXCERPT_LIMIT].replace("\x00", "\ufffd")


async def list_attempts(conn: asyncpg.Connection, tenant_id: str, message_id: str) -> list[Attempt]:
    """A message's attempts, oldest first (none for another tenant's message)."""
    rows = await conn.fetch(
        f"SELECT {_COLUMNS} FROM webhook_attempts WHERE tenant_id = $1 AND message_id = $2"  # noqa: S608
        " ORDER BY started_at, id",
        tenant_id, message_id,
    )
    return [Attempt(**dict(r)) for r in rows]
