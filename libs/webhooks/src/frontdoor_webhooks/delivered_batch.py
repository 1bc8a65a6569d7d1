"""Recording delivered attempts in batches: one transaction for many clean ``2xx`` answers.

A deliverer sends hundreds of messages a second; settling each in its own transaction
(attempt row, message ``delivered``, endpoint healthy) costs more than the send. Only the
outcome that needs nothing else is batched: a ``2xx`` the engine accepts, of a message
without a settle hook (not a perform message, whose answer is written with the ledger's
consequence in the attempt's own transaction). Retries, failures, exhaustion and
disabling keep the engine's one-attempt settle, unchanged.

Safe because each message stays leased to its claim until the batch commits (a batch
waits at most ``max_wait`` seconds, far inside the lease) and the message's update is
the same compare-and-set on the claim as a single settle's: if the process dies before the
commit, nothing of those attempts is written and each message is sent again, under the
same webhook-id, once its lease ends, as after a crash between a send and its settle.
A batch whose transaction fails fails every attempt in it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any, Final

import asyncpg
import msgspec
from frontdoor_core.ids import new_id

from .attempts import excerpt, redacted_headers
from .delivery import ClaimedMessage, DeliveryReport, _parse_json
from .sender import SenderResponse

__all__ = ["DeliveredBatch"]

MAX_BATCH: Final = 200
MAX_WAIT: Final = 0.005

_ATTEMPTS = """
INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url, started_at, duration_ms,
                              response_status, error_class, response_excerpt, request_headers, next_attempt_at)
SELECT t, i, m, e, a, u, s, d, st, NULL, x, h::jsonb, NULL
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::timestamptz[],
              $8::int[], $9::int[], $10::text[], $11::text[]) AS r(t, i, m, e, a, u, s, d, st, x, h)
"""
_MESSAGES = """
UPDATE webhook_messages AS m
   SET state = 'delivered', next_attempt_at = NULL, locked_until = NULL, last_status = r.st,
       delivered_at = r.ended, finished_at = r.ended
  FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::int[], $6::timestamptz[])
       AS r(t, i, a, lu, st, ended)
 WHERE m.tenant_id = r.t AND m.id = r.i AND m.state = 'pending' AND m.attempts = r.a AND m.locked_until = r.lu
RETURNING m.id
"""
_HEALTHY = """
UPDATE webhook_endpoints AS e SET failing_since = NULL
  FROM unnest($1::text[], $2::text[]) AS r(t, i)
 WHERE e.tenant_id = r.t AND e.id = r.i AND e.failing_since IS NOT NULL
"""


class _Item(msgspec.Struct):
    claimed: ClaimedMessage
    attempt_id: str
    started_at: datetime
    duration_ms: int
    response: SenderResponse
    headers: str
    ended: datetime
    done: Any  # asyncio.Future[DeliveryReport]


class DeliveredBatch:
    """Collects delivered attempts and writes up to ``max_batch`` of them per transaction (`DeliveredRecorder`)."""

    def __init__(self, pool: asyncpg.Pool, *, max_batch: int = MAX_BATCH, max_wait: float = MAX_WAIT) -> None:
        self._pool = pool
        self._max_batch = max(max_batch, 1)
        self._max_wait = max_wait
        self._pending: list[_Item] = []
        self._flusher: asyncio.Task[None] | None = None
        self._full = asyncio.Event()
        self.batches = 0

    async def record(self, claimed: ClaimedMessage, *, started_at: datetime, duration_ms: int,
                     response: SenderResponse, headers: dict[str, str], ended: datetime) -> DeliveryReport:
        """Queue one delivered attempt; return its report once its batch has committed."""
        done: asyncio.Future[DeliveryReport] = asyncio.get_running_loop().create_future()
        self._pending.append(_Item(claimed, new_id("att"), started_at, duration_ms, response,
                                   msgspec.json.encode(redacted_headers(headers)).decode(), ended, done))
        if len(self._pending) >= self._max_batch:
            self._full.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())
        return await done

    async def _flush_soon(self) -> None:
        while self._pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), self._max_wait)
            self._full.clear()
            items, self._pending = self._pending[:self._max_batch], self._pending[self._max_batch:]
            if len(self._pending) >= self._max_batch:
                self._full.set()
            try:
                recorded = await self._write(items)
            except BaseException as exc:
                for it in items:
                    if not it.done.done():
                        it.done.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
                if not isinstance(exc, Exception):
                    raise
                continue
            for it in items:
                if not it.done.done():
                    it.done.set_result(_report(it, it.claimed.id in recorded))

    async def _write(self, items: list[_Item]) -> set[str]:
        c = [it.claimed for it in items]
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                _ATTEMPTS, [m.tenant_id for m in c], [it.attempt_id for it in items], [m.id for m in c],
                [m.endpoint_id for m in c], [m.attempt for m in c], [m.url for m in c],
                [it.started_at for it in items], [it.duration_ms for it in items],
                [it.response.status for it in items], [excerpt(it.response.body) for it in items],
                [it.headers for it in items])
            rows = await conn.fetch(
                _MESSAGES, [m.tenant_id for m in c], [m.id for m in c], [m.attempt for m in c],
                [m.locked_until for m in c], [it.response.status for it in items], [it.ended for it in items])
            recorded = {r["id"] for r in rows}
            healthy = sorted({(m.tenant_id, m.endpoint_id) for m in c if m.id in recorded})
            if healthy:
                await conn.execute(_HEALTHY, [t for t, _ in healthy], [e for _, e in healthy])
        self.batches += 1
        return recorded


def _report(it: _Item, recorded: bool) -> DeliveryReport:
    m = it.claimed
    return DeliveryReport(
        message_id=m.id, tenant_id=m.tenant_id, endpoint_id=m.endpoint_id, purpose=m.purpose,
        operation_id=m.operation_id, attempt_id=it.attempt_id, attempt=m.attempt,
        state="delivered" if recorded else "pending", status=it.response.status, error_class=None,
        response_json=_parse_json(it.response), next_attempt_at=None, recorded=recorded)
