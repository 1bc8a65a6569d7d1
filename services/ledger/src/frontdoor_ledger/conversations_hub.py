"""The ledger's side of hosted conversations: readers' wake-ups and the company agent's fast path.

A user's message writes its ``conversation.message.created`` webhook messages in the same
transaction (the outbox), claimed by this process in it (`lease`: the deliverers, woken by
the outbox's notification at commit, skip them until the lease ends, so they cannot send
one first and leave the agent's request answered before the reply; if this process dies the
lease ends and a deliverer sends it). This process then attempts their first delivery at once and
waits up to ``FRONTDOOR_CONVERSATION_REPLY_WAIT``: a company agent that replies through
the ledger API while answering the webhook has its reply in the log before the agent's
request is answered. Whatever is not finished (a slow or failing company agent) stays
with the dispatcher's relay and workers, the same messages retried on the schedule, and
the agent reads the reply later (a long poll or the stream).

In the relay mode (``conversations.relay_endpoint_id``) the agent's message is written with
its relay: a webhook message to the company's own endpoint, claimed by this process in the
same transaction (`store`). This process then sends it at once, signed with that
endpoint's secret, and records the replies in its answer as the company's messages in the
attempt's settle (`frontdoor_conversations.relay_delivery`). Should this process die
first, the claim's lease ends and a deliverer sends the relay instead (ADR 0006,
addendum). While a person answers (``responder: human``) nothing is relayed. A failure
(no answer within the webhook timeout, a refused address, not 2xx, not the contract)
queues the conversation for a person, so the inbox lists it and the agent reads
``queued``, and counts towards the endpoint's failure streak like any failed delivery;
the agent's own request has been answered within the reply budget either way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from frontdoor_conversations import ConversationWaiters, Posted, publish_changed
from frontdoor_conversations.relay import RelayTarget
from frontdoor_conversations.relay_delivery import relay_message
from frontdoor_conversations.relay_endpoints import queue_stranded_relays
from frontdoor_core.logging import get_logger
from frontdoor_tenancy import issuer_settings
from frontdoor_tenancy.credentials import Kek
from frontdoor_tenancy.issuer_settings import HostedConversations
from frontdoor_webhooks.claims import extend_lease, release_claims
from frontdoor_webhooks.delivery import ClaimedMessage, deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.rate_windows import PgThrottle
from frontdoor_webhooks.sender import SafeSender, partitioned

if TYPE_CHECKING:
    from .context import LedgerContext

__all__ = ["ConversationsHub", "queue_stranded"]

_log = get_logger("frontdoor.ledger")
_SETTINGS_TTL = 5.0


async def queue_stranded(ctx: LedgerContext, tenant_id: str, endpoint_id: str,
                         on_changed: Callable[[str, str], Awaitable[None]]) -> None:
    """An attempt of this process disabled the endpoint (``410 Gone``, failing too long): the
    conversations of its waiting relays go to a person, as after a deliverer's attempt.

    Just after the attempt's commit, not in it (as the deliverer); should this process die in
    between, those relays wait for the endpoint. A relay's own attempt does it in its settle.
    """
    try:
        async with ctx.pool.acquire() as conn, conn.transaction():
            changed = await queue_stranded_relays(conn, tenant_id, endpoint_id, now=ctx.now())
    except Exception as exc:
        _log.error("conversation_relays_not_queued", endpoint_id=endpoint_id, error=type(exc).__name__)
        return
    for conversation_id in changed:
        try:
            await on_changed(tenant_id, conversation_id)
        except Exception:  # best effort: readers re-read when their wait ends
            _log.warning("conversation_wakeup_failed", conversation_id=conversation_id)


class ConversationsHub:
    """Per process: the readers waiting on conversations, and first deliveries to the company agent."""

    def __init__(self, ctx: LedgerContext, *, fetcher: Any, kek: Kek, sender: Any = None) -> None:
        self._ctx = ctx
        self._kek = kek
        self._sender = sender or SafeSender(fetcher)
        self._policy = DeliveryPolicy.from_settings(ctx.settings)
        self._throttle = PgThrottle(ctx.pool)  # one count per endpoint with the deliverers (ADR 0006)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._settings: dict[str, tuple[float, HostedConversations]] = {}
        self.waiters = ConversationWaiters(ctx.runtime.redis)

    async def start(self) -> None:
        await self.waiters.start()

    async def close(self) -> None:
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=self._policy.timeout.total_seconds() + 1)
        await self.waiters.stop()

    async def hosted(self, tenant_id: str) -> HostedConversations:
        """The tenant's hosted-conversations setting, cached for a few seconds per process."""
        hit = self._settings.get(tenant_id)
        if hit and time.monotonic() - hit[0] < _SETTINGS_TTL:
            return hit[1]
        async with self._ctx.pool.acquire() as conn:
            stored = await issuer_settings.get_settings(conn, tenant_id)
        if len(self._settings) > 10_000:
            self._settings.clear()
        self._settings[tenant_id] = (time.monotonic(), stored.settings.conversations)
        return stored.settings.conversations

    async def changed(self, tenant_id: str, conversation_id: str) -> None:
        """New events were committed: wake this process's readers and tell the others."""
        self.waiters.wake(tenant_id, conversation_id)
        await publish_changed(self._ctx.runtime.redis, tenant_id, conversation_id)

    @property
    def lease(self) -> timedelta:
        """The claim ``store.start``/``post_message`` take on the webhook messages they write."""
        return self._policy.lease

    async def _attempt(self, tenant_id: str, message_id: str, claimed: ClaimedMessage | None = None) -> Any:
        ctx = self._ctx
        try:
            report = await deliver(ctx.pool, message_id, sender=partitioned(self._sender, tenant_id), kek=self._kek,
                                   clock=ctx.runtime.clock, policy=self._policy, tenant_id=tenant_id,
                                   throttle=self._throttle, claimed=claimed)
        except Exception:  # the relay retries; the message is in PostgreSQL
            _log.exception("conversation_delivery_failed", message_id=message_id)
            return None
        if report is not None and report.endpoint_disabled:
            await queue_stranded(ctx, tenant_id, report.endpoint_id, self.changed)
        return report

    async def relay_target(self, tenant_id: str) -> RelayTarget | None:
        """The relay mode's endpoint for ``store.start``/``post_message`` (None in the webhook mode)."""
        endpoint_id = (await self.hosted(tenant_id)).relay_endpoint_id
        return None if endpoint_id is None else RelayTarget(endpoint_id=endpoint_id, lease=self._policy.lease)

    async def _take_turn(self, endpoint_id: str, per_second: int) -> bool:
        """The endpoint's ``rate_limit_per_second``, counted with its deliveries (one window across
        senders); False when no turn came within one delivery's timeout."""
        budget = self._policy.timeout.total_seconds()
        waited = 0.0
        while (wait := await self._throttle.wait(endpoint_id, per_second)) > 0:
            waited += wait
            if waited > budget:
                return False
            await asyncio.sleep(wait)
        return True

    async def _relay(self, claimed: ClaimedMessage) -> None:
        """The fast path of a relay this process claimed when it wrote the agent's message."""
        ctx = self._ctx
        if claimed.rate_limit_per_second is not None and not await self._take_turn(
                claimed.endpoint_id, claimed.rate_limit_per_second):
            async with ctx.pool.acquire() as conn:  # no turn now: a deliverer sends it, paced
                await release_claims(conn, [claimed])
            _log.info("conversation_relay_deferred", message_id=claimed.id)
            return
        now = ctx.now()
        if claimed.locked_until - now < self._policy.timeout + timedelta(seconds=1):
            async with ctx.pool.acquire() as conn:  # the wait for a turn used part of the lease
                renewed = await extend_lease(conn, claimed, now, self._policy.lease)
            if renewed is None:
                return  # the lease ended and a deliverer took the relay
            claimed = renewed
        await relay_message(ctx.pool, ctx.runtime.redis, claimed, sender=partitioned(self._sender, claimed.tenant_id),
                            kek=self._kek, clock=ctx.runtime.clock, policy=self._policy, on_changed=self.changed)

    async def _relay_task(self, claimed: ClaimedMessage) -> None:
        try:
            await self._relay(claimed)
        except Exception:  # not settled: the lease ends and a deliverer sends the relay again
            _log.exception("conversation_relay_crashed", message_id=claimed.id)

    def _track(self, job: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def after_commit(self, tenant_id: str, posted: Posted, *, also_changed: str | None = None
                     ) -> list[asyncio.Task[Any]]:
        """Start what follows an agent's committed message, without awaiting anything.

        Called with no ``await`` between the commit and this call: the first attempt at each
        webhook message (and the relay, in the relay mode) and the readers' wake-up run as
        this process's tasks, so a request cancelled now (the client gone, the process
        stopping) still attempts them at once rather than leaving them to a deliverer a
        lease later. Returns the tasks (the wake-up first), for `wait_for_replies`.
        """
        if posted.replay:
            return []
        held = {c.id: c for c in posted.webhook_claims}
        jobs: list[Any] = [self._attempt(tenant_id, message_id, held.get(message_id))
                           for message_id in posted.webhook_message_ids]
        if posted.relay is not None:
            jobs.append(self._relay_task(posted.relay))
        woken = [posted.conversation.id, *([also_changed] if also_changed else [])]
        return [self._track(self._wake(tenant_id, woken)), *(self._track(job) for job in jobs)]

    async def _wake(self, tenant_id: str, conversation_ids: list[str]) -> None:
        for conversation_id in conversation_ids:
            try:
                await self.changed(tenant_id, conversation_id)
            except Exception:  # best effort: readers re-read when their wait ends
                _log.warning("conversation_wakeup_failed", conversation_id=conversation_id)

    async def wait_for_replies(self, attempts: Sequence[asyncio.Task[Any]]) -> None:
        """Return when the readers are woken and every attempt is answered, or at the reply budget
        (past it they carry on)."""
        if attempts:
            await asyncio.wait(attempts, timeout=self._ctx.settings.conversation_reply_wait.total_seconds())
