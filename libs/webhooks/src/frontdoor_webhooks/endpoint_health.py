"""An endpoint's failure streak, and disabling it when the receiver is gone or keeps failing.

``failing_since`` is set by the first failed attempt after a success and cleared by the
next success. An endpoint is disabled when it answers ``410 Gone``, or when it has been
failing for ``webhook_disable_after``. Disabling is audited (the system acts) and
reported to the tenant's other endpoints as ``endpoint.disabled``, once: only the
delivery that actually flips ``enabled`` does it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .messages import enqueue_event, next_event_sequence
from .parking import park

__all__ = ["note_failure"]


async def note_failure(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, *, started_at: datetime,
                       now: datetime, disable_after: timedelta, gone: bool) -> bool:
    """Record a failed attempt; disable the endpoint when it is gone or failing too long.

    Args:
        started_at: When the failed attempt began (starts the streak if none).
        now: When it ended.
        disable_after: The longest failure streak tolerated.
        gone: The receiver answered ``410 Gone``.

    Returns:
        True when this call disabled the endpoint.
    """
    failing_since = await conn.fetchval(
        "UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, $3)"
        " WHERE tenant_id = $1 AND id = $2 RETURNING failing_since",
        tenant_id, endpoint_id, started_at,
    )
    if failing_since is None:
        return False  # deleted meanwhile
    if gone:
        reason = "gone"
    elif now - failing_since >= disable_after:
        reason = "failing"
    else:
        return False
    flipped = await conn.fetchval(
        "UPDATE webhook_endpoints SET enabled = false, disabled_at = $3, disabled_reason = $4, updated_at = $3"
        " WHERE tenant_id = $1 AND id = $2 AND enabled RETURNING url",
        tenant_id, endpoint_id, now, reason,
    )
    if flipped is None:
        return False
    await park(conn, tenant_id, endpoint_id)  # its messages wait out of the due index
    await audit.record(conn, Actor(tenant_id=tenant_id, type="system"), "webhook_endpoint.disabled",
                       target_type="webhook_endpoint", target_id=endpoint_id,
                       details={"reason": reason, "failing_since": failing_since.isoformat()}, at=now)
    await enqueue_event(conn, tenant_id, "endpoint.disabled",
                        {"endpoint_id": endpoint_id, "url": flipped, "reason": reason,
                         "failing_since": failing_since.isoformat().replace("+00:00", "Z"),
                         "sequence": await next_event_sequence(conn)},
                        now, exclude_endpoint=endpoint_id)
    return True
