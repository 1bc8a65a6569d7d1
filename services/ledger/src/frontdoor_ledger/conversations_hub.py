"""The ledger's side of hosted conversations: readers' wake-ups and the company agent's fast path.

A user's message writes its ``conversation.message.created`` webhook messages in the same
transaction (the outbox). This process then attempts their first delivery at once and
waits up to ``FRONTDOOR_CONVERSATION_REPLY_WAIT``: a company agent that replies through
the ledger API while answering the webhook has its reply in the log before the agent's
request is answered. Whatever is not finished (a slow or failing company agent) stays
with the dispatcher's relay and workers, the same messages retried on the schedule, and
the agent reads the reply later (a long poll or the stream).

In the relay mode (``conversations.relay_endpoint_id``) this process also POSTs the agent's
message to the company's own endpoint, signed with that endpoint's secret, and records the
replies in its answer as the company's messages (`frontdoor_conversations.relay` is the
contract). While a person answers (``responder: human``) nothing is relayed. A failure
(no answer within the webhook timeout, a refused address, not 2xx, not the contract)
queues the conversation for a person, so the inbox lists it and the agent reads
``queued``; the agent's own request has been answered within the reply budget either way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from frontdoor_conversations import ConversationRefused, ConversationWaiters, Posted, publish_changed, store
from frontdoor_conversations.relay import RelayAnswer, RelayFailed, read_answer, relay_body, relay_message_id
from frontdoor_core.errors import DomainError
from frontdoor_core.logging import get_logger
from frontdoor_tenancy import issuer_settings
from frontdoor_tenancy.credentials import Kek
from frontdoor_tenancy.issuer_settings import HostedConversations
from frontdoor_webhooks.delivery import deliver
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.endpoint_secrets import signing_secrets
from frontdoor_webhooks.endpoints import get_endpoint
from frontdoor_webhooks.rate_windows import PgThrottle
from frontdoor_webhooks.sender import SafeSender, SendError, partitioned
from frontdoor_webhooks.signing import webhook_headers

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
            return await deliver(ctx.pool, message_id, sender=partitioned(self._sender, tenant_id), kek=self._kek,
                                 clock=ctx.runtime.clock,
                                 policy=self._policy, tenant_id=tenant_id, throttle=self._throttle)
        except Exception:  # the relay retries; the message is in PostgreSQL
            _log.exception("conversation_delivery_failed", message_id=message_id)
            return None

    async def _post_relay(self, tenant_id: str, endpoint_id: str, data: dict[str, Any]) -> RelayAnswer:
        ctx = self._ctx
        now = ctx.now()
        async with ctx.pool.acquire() as conn:
            endpoint = await get_endpoint(conn, tenant_id, endpoint_id)
            if not endpoint.enabled:
                raise RelayFailed("the relay endpoint is disabled")
            secrets = await signing_secrets(conn, tenant_id, endpoint_id, self._kek, now)
        if endpoint.rate_limit_per_second is not None:
            await self._take_turn(endpoint_id, endpoint.rate_limit_per_second)
        body = relay_body(data, now)
        headers = webhook_headers(secrets, relay_message_id(str(data["event_id"])), int(now.timestamp()), body)
        answer = await partitioned(self._sender, tenant_id).post(endpoint.url, body, headers,
                                                                 self._policy.timeout.total_seconds())
        return read_answer(answer.status, answer.body, truncated=answer.truncated)

    async def _take_turn(self, endpoint_id: str, per_second: int) -> None:
        """The endpoint's ``rate_limit_per_second``, counted with its deliveries (one window across
        senders); waiting longer than one delivery's timeout is a failure."""
        budget = self._policy.timeout.total_seconds()
        waited = 0.0
        while (wait := await self._throttle.wait(endpoint_id, per_second)) > 0:
            waited += wait
            if waited > budget:
                raise RelayFailed("the endpoint's rate limit left no turn within the timeout")
            await asyncio.sleep(wait)

    async def _queue(self, tenant_id: str, conversation_id: str) -> None:
        async with self._ctx.pool.acquire() as conn:
            queued = await store.queue_for_person(conn, tenant_id, conversation_id, now=self._ctx.now())
        if queued is not None:
            await self.changed(tenant_id, conversation_id)

    async def _record(self, tenant_id: str, conversation_id: str, event_id: str, answer: RelayAnswer) -> None:
        """The answer's replies as the company agent's messages, in order; none once a person answers."""
        ctx = self._ctx
        last = len(answer.messages) - 1
        async with ctx.pool.acquire() as conn:
            for index, m in enumerate(answer.messages):
                current = await store.find(conn, tenant_id, conversation_id)
                if current is None or current.responder == "human":
                    break  # a person took over meanwhile: they answer, not the relayed agent
                try:
                    await store.company_message(conn, tenant_id, conversation_id,
                                                message_id=m.id or f"re-{event_id}-{index}", text=m.text,
                                                data=m.data, sender="agent", done=answer.done and index == last,
                                                now=ctx.now())
                except ConversationRefused as exc:  # closed meanwhile, or an ID reused for another reply
                    _log.warning("conversation_relay_reply_refused", conversation_id=conversation_id,
                                 error=str(exc.error.code))
                    break
        if answer.messages:
            await self.changed(tenant_id, conversation_id)
        if answer.handoff:
            await self._queue(tenant_id, conversation_id)

    async def _relay(self, tenant_id: str, endpoint_id: str, data: dict[str, Any]) -> None:
        conversation_id = str(data["conversation_id"])
        try:
            answer = await self._post_relay(tenant_id, endpoint_id, data)
        except (RelayFailed, SendError, DomainError, ValueError) as exc:  # never the body or the secret
            reason = exc.detail if isinstance(exc, SendError | DomainError) else str(exc)
            _log.warning("conversation_relay_failed", conversation_id=conversation_id, endpoint_id=endpoint_id,
                         reason=reason[:200])
            await self._queue(tenant_id, conversation_id)
            return
        await self._record(tenant_id, conversation_id, str(data["event_id"]), answer)

    async def _relay_task(self, tenant_id: str, endpoint_id: str, data: dict[str, Any]) -> None:
        try:
            await self._relay(tenant_id, endpoint_id, data)
        except Exception:  # e.g. a secret that does not decrypt: the agent's message is recorded
            _log.exception("conversation_relay_crashed", conversation_id=data.get("conversation_id"))
            try:
                await self._queue(tenant_id, str(data["conversation_id"]))  # a person sees it in the inbox
            except Exception:
                _log.exception("conversation_relay_queue_failed", conversation_id=data.get("conversation_id"))

    async def deliver_and_wait(self, tenant_id: str, message_ids: Sequence[str], *,
                               posted: Posted | None = None) -> None:
        """Attempt each webhook message now (and the relay, in the relay mode); return when all
        are answered or at the reply budget."""
        jobs: list[Any] = [self._attempt(tenant_id, message_id) for message_id in message_ids]
        if posted is not None and posted.relay_data is not None and posted.conversation.responder == "agent":
            endpoint_id = (await self.hosted(tenant_id)).relay_endpoint_id
            if endpoint_id is not None:
                jobs.append(self._relay_task(tenant_id, endpoint_id, posted.relay_data))
        if not jobs:
            return
        attempts = []
        for job in jobs:
            task = asyncio.create_task(job)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            attempts.append(task)
        budget = self._ctx.settings.conversation_reply_wait.total_seconds()
        await asyncio.wait(attempts, timeout=budget)  # past the budget they carry on in the background
