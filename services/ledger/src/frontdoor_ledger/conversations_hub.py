"""The ledger's side of hosted conversations: readers' wake-ups and the company agent's fast path.

A user's message writes its ``conversation.message.created`` webhook messages in the same
transaction (the outbox). This process then attempts their first delivery at once and
waits up to ``FRONTDOOR_CONVERSATION_REPLY_WAIT``: a company agent that replies through
the ledger API while answering the webhook has its reply in the log before the agent's
request is answered. Whatever is not finished (a slow or failing company agent) stays
with the dispatcher's relay and workers, the same messages retried on the schedule, and
the agent reads the reply later (a long poll or the stream).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from frontdoor_conversations import ConversationWaiters, publish_changed
from frontdoor_core.logging import get_logger
from frontdoor_tenancy import issuer_settings
from frontdoor_tenancy.credentials import Kek
from frontdoor_tenancy.issuer_settings import HostedConversations
from frontdoor_webhooks.delivery import deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.rate_windows import PgThrottle
from frontdoor_webhooks.sender import SafeSender

if TYPE_CHECKING:
    from .context import LedgerContext

__all__ = ["ConversationsHub"]

_log = get_logger("frontdoor.ledger")
_SETTINGS_TTL = 5.0


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

    async def _attempt(self, tenant_id: str, message_id: str) -> Any:
        ctx = self._ctx
        try:
            return await deliver(ctx.pool, message_id, sender=self._sender, kek=self._kek, clock=ctx.runtime.clock,
                                 policy=self._policy, tenant_id=tenant_id, throttle=self._throttle)
        except Exception:  # the relay retries; the message is in PostgreSQL
            _log.exception("conversation_delivery_failed", message_id=message_id)
            return None

    async def deliver_and_wait(self, tenant_id: str, message_ids: Sequence[str]) -> None:
        """Attempt each webhook message now; return when all are answered or at the reply budget."""
        if not message_ids:
            return
        attempts = []
        for message_id in message_ids:
            task = asyncio.create_task(self._attempt(tenant_id, message_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            attempts.append(task)
        budget = self._ctx.settings.conversation_reply_wait.total_seconds()
        await asyncio.wait(attempts, timeout=budget)  # past the budget they carry on in the background
