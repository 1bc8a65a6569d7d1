"""Conversation retention: every 10 minutes, events older than each tenant's
``conversations.retention_days`` are forgotten (in chunks, within a time budget; the
next run goes on). Their cursors then answer ``410 cursor_expired`` (PAP-7.5-04)."""

from __future__ import annotations

from datetime import UTC, datetime

import structlog
from frontdoor_conversations.retention import forget_expired

from ..celery_app import _settings, app
from ..worker_runtime import run, runtime

_log = structlog.get_logger("frontdoor.dispatcher")


async def _forget() -> int:
    rt = await runtime(_settings)
    return await forget_expired(rt.pool, datetime.now(UTC))


@app.task(name="frontdoor.conversations.retention", ignore_result=True)
def retention() -> int:
    """Forget conversation events past their tenant's retention."""
    count = run(_forget())
    if count:
        _log.info("conversation_events_forgotten", count=count)
    return count
