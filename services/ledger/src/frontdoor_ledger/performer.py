"""The ledger's fast path: perform a winning confirm at once and wait, briefly, for its outcome.

A confirm that wins the compare-and-set writes its perform message already claimed by this
process (`ledger.confirm_claimed`: no notification wakes a deliverer for it, no second
statement claims it), starts that first attempt here, then waits up to ``FRONTDOOR_CONFIRM_WAIT`` for the outcome: woken by
this attempt finishing or by the settled channel (another process, or the company's
report through the ledger API), never by polling. Past the budget the agent gets the
operation ``in_progress`` with ``Retry-After``; the attempt carries on in the
background, and if this process dies the delivery lease expires and the dispatcher's
deliverer retries the same message.

Re-pricing: when the kind names a re-price endpoint, the confirm first asks it for the
current terms (a signed ``operation.reprice`` POST); changed terms become a new revision
and the confirm is answered ``409 terms_changed``. The call follows the delivery rules of
its endpoint: none is made while the endpoint is disabled (the confirm is answered ``503``
as when the perform endpoint is disabled), and each counts against the endpoint's
``rate_limit_per_second`` (over it, ``503`` with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec
from frontdoor_conversations import publish_changed
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.logging import get_logger
from frontdoor_core.outbound import SafeFetcher
from frontdoor_operations import kinds, ledger
from frontdoor_operations.ledger import Operation
from frontdoor_operations.perform import perform_message
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import PreClaimed
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.endpoint_secrets import signing_secrets
from frontdoor_webhooks.endpoints import get_endpoint
from frontdoor_webhooks.rate_windows import PgThrottle
from frontdoor_webhooks.sender import SafeSender, SendError, partitioned
from frontdoor_webhooks.signing import webhook_headers

from .conversations_hub import queue_stranded

if TYPE_CHECKING:
    from .context import LedgerContext

__all__ = ["Performer", "RepriceUnavailable"]

_log = get_logger("frontdoor.ledger")
_REPRICE_TIMEOUT = 5.0


class RepriceUnavailable(Exception):
    """The re-price endpoint did not give current terms: the confirm cannot go ahead now.

    Attributes:
        retry_after: Seconds the agent is told to wait; None for the ledger's default.
    """

    def __init__(self, retry_after: int | None = None) -> None:
        super().__init__("current terms are not available")
        self.retry_after = retry_after


_DISABLED_RETRY_AFTER = 60
"""Seconds to wait while a kind's endpoint is disabled (as for a disabled perform endpoint)."""


class Performer:
    """Runs perform attempts for this ledger process and waits for outcomes."""

    def __init__(self, ctx: LedgerContext, *, fetcher: Any, kek: Kek, sender: Any = None) -> None:
        self._ctx = ctx
        self._kek = kek
        # Keep-alive connections to each company's endpoints (one pool per origin): a
        # confirm's perform webhook needs no new TCP/TLS connection at a steady rate.
        self._pooled = fetcher.pooled() if sender is None and isinstance(fetcher, SafeFetcher) else None
        self._sender = sender or SafeSender(self._pooled if self._pooled is not None else fetcher)
        self._policy = DeliveryPolicy.from_settings(ctx.settings)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._throttle = PgThrottle(ctx.pool)  # one count per endpoint with the deliverers (ADR 0006)

    async def close(self) -> None:
        """Let running attempts finish (bounded by the webhook timeout), then close the connections."""
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self._policy.timeout.total_seconds() + 1)
        if self._pooled is not None:
            await self._pooled.aclose()

    @property
    def lease(self) -> timedelta:
        """How long a claim of this process's attempts lasts (the delivery policy's lease)."""
        return self._policy.lease

    async def _attempt(self, tenant_id: str, message_id: str, settled: list[Operation],
                       claim: PreClaimed | None = None) -> Any:
        ctx = self._ctx
        try:
            report = await perform_message(ctx.pool, ctx.runtime.redis, message_id,
                                           sender=partitioned(self._sender, tenant_id), kek=self._kek,
                                           clock=ctx.runtime.clock, policy=self._policy, tenant_id=tenant_id,
                                           on_settled=self._wake, throttle=self._throttle, settled=settled,
                                           claimed=None if claim is None else claim.message,
                                           claimed_secrets=None if claim is None else claim.secret_rows)
        except Exception:  # the deliverer retries; the record is in PostgreSQL
            _log.exception("perform_attempt_failed", message_id=message_id)
            return None
        if report is not None and report.endpoint_disabled:  # its waiting relays' conversations go to a person
            await queue_stranded(ctx, tenant_id, report.endpoint_id, self._conversation_changed)
        return report

    async def _conversation_changed(self, tenant_id: str, conversation_id: str) -> None:
        await publish_changed(self._ctx.runtime.redis, tenant_id, conversation_id)  # every process's readers

    async def _wake(self, operation_id: str) -> None:
        self._ctx.waiters.wake(operation_id)

    async def perform_and_wait(self, tenant_id: str, operation_id: str, message_id: str, *,
                               claim: PreClaimed | None = None) -> Operation | None:
        """Attempt the perform webhook now and answer the operation once settled or at the budget.

        ``claim``: the perform message as the confirm wrote it, already claimed for this
        attempt (`ledger.confirm_claimed`); without it the attempt claims the message first.

        The waiter is registered before the attempt starts, and the operation is read again
        once the attempt ends, so an outcome recorded by another process in between is never
        missed. After a ``202`` (or when another process holds the message) it keeps waiting,
        within the budget, for the outcome to be reported; after a failed attempt it answers
        at once: the outcome is unknown and a retry is scheduled. When this attempt recorded
        the outcome, the operation as its transaction committed it is the answer (no read).
        """
        budget = self._ctx.settings.confirm_wait.total_seconds()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        waiter = asyncio.create_task(self._ctx.waiters.wait(operation_id, budget))
        await asyncio.sleep(0)  # let the waiter register before anything can settle
        settled: list[Operation] = []  # filled once this attempt's outcome is committed
        attempt = asyncio.create_task(self._attempt(tenant_id, message_id, settled, claim))
        self._tasks.add(attempt)
        attempt.add_done_callback(self._tasks.discard)
        try:
            done, _ = await asyncio.wait({waiter, attempt}, timeout=budget, return_when=asyncio.FIRST_COMPLETED)
            if settled:  # this attempt recorded the outcome (the waiter was woken by it)
                return settled[0]
            if waiter not in done and attempt in done:
                current = await self._read(tenant_id, operation_id)
                if current is None or current.state != "in_progress":
                    return current
                report = attempt.result()
                if report is None or report.state == "delivered":  # elsewhere, or accepted: await the report
                    await asyncio.wait({waiter}, timeout=max(deadline - loop.time(), 0))
        finally:
            if not waiter.done():
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
        return await self._read(tenant_id, operation_id)

    async def _read(self, tenant_id: str, operation_id: str) -> Operation | None:
        async with self._ctx.pool.acquire() as conn:
            return await ledger.get_operation(conn, tenant_id, operation_id)

    async def reprice(self, tenant_id: str, op: Operation, *,
                      targets: kinds.ConfirmTargets | None = None) -> Operation | None:
        """Ask the kind's re-price endpoint for current terms; a new revision when they changed.

        ``targets``: the kind's endpoints as the confirm already read them
        (`kinds.confirm_targets`); without a re-price endpoint nothing more is read.

        Raises:
            RepriceUnavailable: no usable answer, the endpoint is disabled, or it is over its
                ``rate_limit_per_second`` (the confirm is refused with 503).
        """
        ctx = self._ctx
        if targets is not None and targets.reprice_endpoint_id is None:
            return None
        async with ctx.pool.acquire() as conn:
            if targets is not None:
                reprice_endpoint_id = targets.reprice_endpoint_id
            else:
                kind = await kinds.get_kind(conn, tenant_id, op.kind)
                reprice_endpoint_id = None if kind is None else kind.reprice_endpoint_id
            if reprice_endpoint_id is None:
                return None
            endpoint = await get_endpoint(conn, tenant_id, reprice_endpoint_id)
            if not endpoint.enabled:  # as every delivery: nothing is sent to a disabled endpoint
                raise RepriceUnavailable(retry_after=_DISABLED_RETRY_AFTER)
            keys = await signing_secrets(conn, tenant_id, endpoint.id, self._kek, ctx.now())
        if endpoint.rate_limit_per_second is not None:  # counted with the endpoint's deliveries
            wait = await self._throttle.wait(endpoint.id, endpoint.rate_limit_per_second)
            if wait > 0:
                raise RepriceUnavailable(retry_after=max(math.ceil(wait), 1))
        now = ctx.now()
        # Not a perform: no idempotency key, so a receiver keyed on it cannot mistake this for one.
        data = {k: v for k, v in ledger.perform_data(op).items() if k != "idempotency_key"}
        body = msgspec.json.encode({"type": "operation.reprice", "timestamp": now.isoformat(), "data": data})
        headers = webhook_headers(keys, "msg_reprice_" + secrets.token_hex(12), int(now.timestamp()), body)
        try:
            answer = await partitioned(self._sender, tenant_id).post(endpoint.url, body, headers, _REPRICE_TIMEOUT)
            quoted = msgspec.json.decode(answer.body) if 200 <= answer.status < 300 else None
        except (SendError, msgspec.DecodeError):
            quoted = None
        summary, terms = _quote(quoted, op)
        if summary == op.summary and terms == op.terms:
            return None
        try:
            async with ctx.pool.acquire() as conn:
                return await ledger.revise(conn, tenant_id, op.id, summary=summary, terms=terms, now=now)
        except Invalid:
            raise RepriceUnavailable from None  # the company's quote is not a valid revision
        except (Conflict, NotFound):
            return None  # confirmed elsewhere, or lapsed, meanwhile: the confirm answers it as it is


def _quote(quoted: Any, op: Operation) -> tuple[str, dict[str, Any] | None]:
    """The quote's summary and terms; a missing ``terms`` keeps the current ones, ``null`` removes them.

    Raises:
        RepriceUnavailable: no usable quote.
    """
    if not isinstance(quoted, dict):
        raise RepriceUnavailable
    summary = quoted.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        raise RepriceUnavailable
    if "terms" not in quoted:
        return summary, op.terms
    terms = quoted["terms"]
    if terms is not None and not isinstance(terms, dict):
        raise RepriceUnavailable
    return summary, terms
