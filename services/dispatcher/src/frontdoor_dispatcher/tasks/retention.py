"""Retention of the tables that grow without bound (docs/scaling.md).

``frontdoor.retention.partitions`` (daily): ``webhook_attempts`` keeps a partition for this
month and the next three, and drops the months ended longer ago than
``FRONTDOOR_WEBHOOK_ATTEMPTS_RETENTION`` (``frontdoor_webhooks.attempt_partitions``).
``frontdoor.retention.audit`` (hourly): audit log entries older than
``FRONTDOOR_AUDIT_RETENTION`` are deleted in chunks within a time budget
(``frontdoor_tenancy.audit_retention``). ``frontdoor.retention.sessions`` (hourly): Sessions
inactive and sign-in attempts ended longer ago than ``FRONTDOOR_SESSION_RETENTION``, once the
agent funnel rolled up their days, likewise (``frontdoor_sessions.session_retention``, ADR 0007).
``frontdoor.retention.operations`` (hourly): final operations finished longer ago than
``FRONTDOOR_OPERATION_RETENTION``, with their revisions and perform messages, once the funnel
and billing counted their days, likewise (``frontdoor_operations.retention``, ADR 0007 addendum).
Session events and outbox events are pruned by the
existing ``frontdoor.events.prune_forwarded``; webhook messages by ``frontdoor.webhooks.prune``.
Every task is safe to run twice at once or after a crash.
"""

from __future__ import annotations

import structlog
from frontdoor_core.clock import utc_now
from frontdoor_operations.retention import prune_operations
from frontdoor_sessions.session_retention import prune_sessions, prune_sign_in_attempts
from frontdoor_tenancy.audit_retention import prune_audit
from frontdoor_webhooks.attempt_partitions import maintain

from ..celery_app import _settings, app
from ..worker_runtime import run, runtime

_log = structlog.get_logger("frontdoor.dispatcher")
_AUDIT_BUDGET_S = 50.0
_SESSIONS_BUDGET_S = 25.0  # each table: 50 s a run together, like the audit prune
_OPERATIONS_BUDGET_S = 50.0


async def _partitions() -> tuple[list[str], list[str], int]:
    rt = await runtime(_settings)
    async with rt.pool.acquire() as conn:
        result = await maintain(conn, utc_now(), _settings.webhook_attempts_retention)
    return result.created, result.dropped, result.moved_rows


@app.task(name="frontdoor.retention.partitions", ignore_result=True)
def partitions() -> int:
    """Create the coming months' attempt partitions; drop the months past retention."""
    created, dropped, moved = run(_partitions())
    if created or dropped:
        _log.info("attempt_partitions_maintained", created=created, dropped=dropped, moved_rows=moved)
    return len(created) + len(dropped)


async def _audit() -> int:
    rt = await runtime(_settings)
    return await prune_audit(rt.pool, utc_now(), _settings.audit_retention, budget_s=_AUDIT_BUDGET_S)


@app.task(name="frontdoor.retention.audit", ignore_result=True)
def audit() -> int:
    """Delete audit log entries past retention, oldest first, in chunks."""
    count = run(_audit())
    if count:
        _log.info("audit_log_pruned", count=count)
    return count


async def _sessions() -> tuple[int, int]:
    rt = await runtime(_settings)
    now = utc_now()
    sessions = await prune_sessions(rt.pool, now, _settings.session_retention, budget_s=_SESSIONS_BUDGET_S)
    attempts = await prune_sign_in_attempts(rt.pool, now, _settings.session_retention, budget_s=_SESSIONS_BUDGET_S)
    return sessions, attempts


@app.task(name="frontdoor.retention.sessions", ignore_result=True)
def sessions() -> int:
    """Delete Sessions and sign-in attempts past retention, oldest first, in chunks."""
    n_sessions, n_attempts = run(_sessions())
    if n_sessions or n_attempts:
        _log.info("sessions_pruned", sessions=n_sessions, sign_in_attempts=n_attempts)
    return n_sessions + n_attempts


async def _operations() -> tuple[int, int]:
    rt = await runtime(_settings)
    pruned = await prune_operations(rt.pool, utc_now(), _settings.operation_retention, budget_s=_OPERATIONS_BUDGET_S)
    return pruned.operations, pruned.messages


@app.task(name="frontdoor.retention.operations", ignore_result=True)
def operations() -> int:
    """Delete final operations past retention (with their revisions and perform messages), oldest first."""
    n_operations, n_messages = run(_operations())
    if n_operations:
        _log.info("operations_pruned", operations=n_operations, perform_messages=n_messages)
    return n_operations
