"""Recording delivered attempts in batches: one statement for many clean ``2xx`` answers.

A deliverer sends hundreds of messages a second; settling each in its own transaction
(attempt row, message ``delivered``, endpoint healthy) costs more than the send. Only the
outcome that needs nothing else is batched: a ``2xx`` the engine accepts, of a message
without a settle hook (not a perform message, whose answer is written with the ledger's
consequence in the attempt's own transaction). Retries, failures, exhaustion and
disabling keep the engine's one-attempt settle, unchanged. A batch is one SQL statement
(its own transaction, one round trip): the attempt rows, each message's compare-and-set
and the endpoints' health.

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

# One statement, so one round trip and its own transaction: the attempt rows, the
# compare-and-set of each message on its claim, and the health of the endpoints whose
# messages it recorded (every part sees the same snapshot; the answer is the recorded IDs).
# Each message is found by its key; `state || ''` keeps the state out of the index choice
# (frontdoor_webhooks.delivery, above `_SETTLE`).
_WRITE = """
WITH attempts AS (
  INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url, started_at, duration_ms,
                                response_status, error_class, response_excerpt, request_headers, next_attempt_at)
  SELECT t, i, m, e, a, u, s, d, st, NULL, x, h::jsonb, NULL
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::timestamptz[],
                $8::int[], $9::int[], $10::text[], $11::text[]) AS r(t, i, m, e, a, u, s, d, st, x, h)
), delivered AS (
  UPDATE webhook_messages AS m
     SET state = 'delivered', next_attempt_at = NULL, locked_until = NULL, last_status = r.st,
         delivered_at = r.ended, finished_at = r.ended
    FROM unnest($1::text[], $3::text[], $5::int[], $12::timestamptz[], $9::int[], $13::timestamptz[])
         AS r(t, i, a, lu, st, ended)
   WHERE m.id = r.i AND m.tenant_id || '' = r.t AND m.state || '' = 'pending' AND m.attempts = r.a AND m.locked_until = r.lu
  RETURNING m.tenant_id, m.id, m.endpoint_id
), healthy AS (
  UPDATE webhook_endpoints AS e SET failing_since = NULL
    FROM (SELECT DISTINCT tenant_id, endpoint_id FROM delivered) AS r
   WHERE e.tenant_id = r.tenant_id AND e.id = r.endpoint_id AND e.failing_since IS NOT NULL
)
SELECT id FROM delivered
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
        statuses = [it.response.status for it in items]
        rows = await self._pool.fetch(
            _WRITE, [m.tenant_id for m in c], [it.attempt_id for it in items], [m.id for m in c],
            [m.endpoint_id for m in c], [m.attempt for m in c], [m.url for m in c],
            [it.started_at for it in items], [it.duration_ms for it in items], statuses,
            [excerpt(it.response.body) for it in items], [it.headers for it in items],
            [m.locked_until for m in c], [it.ended for it in items])
        self.batches += 1
        return {r["id"] for r in rows}


def _report(it: _Item, recorded: bool) -> DeliveryReport:
    m = it.claimed
    return DeliveryReport(
        message_id=m.id, tenant_id=m.tenant_id, endpoint_id=m.endpoint_id, purpose=m.purpose,
        operation_id=m.operation_id, attempt_id=it.attempt_id, attempt=m.attempt,
        state="delivered" if recorded else "pending", status=it.response.status, error_class=None,
        response_json=_parse_json(it.response), next_attempt_at=None, recorded=recorded)
