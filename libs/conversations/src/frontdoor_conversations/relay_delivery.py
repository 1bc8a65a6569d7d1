"""One attempt at a relay message, and the company's answer recorded in the transaction that settles it.

A relay is a webhook message (purpose ``relay``, type ``conversation.relay``) to the tenant's
relay endpoint, written and claimed with the agent's message (`store`). It is sent by the
ledger at once (its fast path, `ConversationsHub`) and, should that process die before the
attempt is settled, by a deliverer once the claim's lease ends: both call `relay_message`,
and the delivery engine's claim lets one of them send a given attempt. Everything the
delivery engine does for a message holds for a relay: the signature, the SSRF-safe sender,
the attempt row (the endpoint's attempts list it), the failure streak and automatic
disabling (`endpoint_health`), the endpoint's rate limit.

The answer's consequence is written in the attempt's settle (`delivery.SettleHook`): the
replies, ``authorization`` and ``user_requested`` events (`relay.read_answer`) or, for a failed attempt, the
conversation queued for a person. It commits with the attempt or not at all; if writing it
fails, nothing of the attempt is written and the relay is sent again after the lease. The
first answer to an agent message is recorded exactly once (`store.claim_relay_answer`):
a relay sent again (a recovery, an operator's redelivery) records nothing more, and each
reply's ID is idempotent as well (PAP-7.3-01). A relay has one attempt (`relay_policy`):
an agent waits on it, so a failure queues the conversation at once rather than retrying.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.clock import Clock
from frontdoor_core.logging import get_logger
from frontdoor_tenancy.credentials import Kek
from frontdoor_webhooks.delivery import (
    ClaimedMessage,
    DeliveryReport,
    SecretSource,
    SettleHook,
    Throttle,
    deliver,
    settle_unsent,
)
from frontdoor_webhooks.delivery_policy import DeliveryPolicy
from frontdoor_webhooks.sender import Sender, SenderResponse

from . import store
from .relay import RelayAnswer, RelayFailed, read_answer, relay_policy
from .relay_endpoints import queue_stranded_relays
from .store import ConversationRefused
from .wakeups import publish_changed, publish_delta

__all__ = ["MAX_RELAY_CLAIMS", "relay_accepts", "relay_message"]

_log = get_logger("frontdoor.conversations")

MAX_RELAY_CLAIMS = 5
"""Claims of one relay that never settled (each lease's end claims it again) before the next claim
gives up on it: settled as failed, not sent, the conversation queued for a person."""

Changed = Callable[[str, str], Awaitable[None]]
"""Called with ``(tenant_id, conversation_id)`` once new events are committed (wakes readers)."""


def _answer_of(response: SenderResponse | None) -> RelayAnswer:
    if response is None:
        raise RelayFailed("no answer")
    return read_answer(response.status, response.body, truncated=response.truncated)


def relay_accepts(response: SenderResponse) -> bool:
    """The delivery engine's success test for a relay: a ``2xx`` that is a relay answer by the rules.

    A ``200`` the rules refuse (not the contract, too large, a refused event) is a failed
    attempt (``invalid_response``): it counts towards the endpoint's failure streak.
    """
    try:
        _answer_of(response)
    except RelayFailed:
        return False
    return True


class _Subject(msgspec.Struct, frozen=True):
    conversation_id: str
    event_id: str


def _subject(claimed: ClaimedMessage) -> _Subject:
    """The conversation and agent message a relay is about (from its body, written by `store`)."""
    data = msgspec.json.decode(claimed.body)["data"]
    return _Subject(str(data["conversation_id"]), str(data["event_id"]))


async def _record(conn: asyncpg.Connection, tenant_id: str, subject: _Subject, answer: RelayAnswer, *,
                  body: bytes, now: datetime) -> bool:
    """The answer's ``authorization`` and ``user_requested`` events, then its replies as the company agent's messages, in
    order; the handoff. Nothing once a person answers or the conversation closed. True if anything changed."""
    cid, event_id = subject.conversation_id, subject.event_id
    digest = hashlib.sha256(body).hexdigest()
    if not await store.claim_relay_answer(conn, tenant_id, cid, event_id, digest=digest, now=now):
        _log.info("conversation_relay_answer_repeated", conversation_id=cid, event_id=event_id)
        return False
    current = await store.find(conn, tenant_id, cid)
    if current is None or current.status == "closed" or current.responder == "human":
        return False  # a person took over meanwhile: they answer, not the relayed agent
    try:
        for draft in answer.company_events:  # authorization (PAP-7.11-01), user_requested: before the messages
            await store.company_event(conn, tenant_id, cid, draft, now=now)
    except ConversationRefused:  # closed meanwhile
        return False
    last = len(answer.messages) - 1
    for index, m in enumerate(answer.messages):
        try:
            await store.company_message(conn, tenant_id, cid, message_id=m.id or f"re-{event_id}-{index}",
                                        text=m.text, data=m.data, sender="agent",
                                        done=answer.done and index == last, now=now)
        except ConversationRefused as exc:  # an ID the company reused for another reply
            _log.warning("conversation_relay_reply_refused", conversation_id=cid, error=str(exc.error.code))
            break
    if answer.handoff:
        await store.queue_for_person(conn, tenant_id, cid, now=now)
    return bool(answer.messages or answer.company_events or answer.handoff)


async def _give_up(pool: asyncpg.Pool, claimed: ClaimedMessage, *, policy: DeliveryPolicy, clock: Clock,
                   on_settle: SettleHook, changed: list[str]) -> DeliveryReport:
    """A relay claimed more than `MAX_RELAY_CLAIMS` times without a settle that committed: settled as
    failed without sending it, so its failure branch (never the answer's) queues the conversation
    for a person; should even that fail, the relay is settled alone (the conversation stays as it is)."""
    _log.error("conversation_relay_given_up", message_id=claimed.id, endpoint_id=claimed.endpoint_id,
               attempt=claimed.attempt)
    reason = f"not settled after {MAX_RELAY_CLAIMS} claims"
    try:
        return await settle_unsent(pool, claimed, policy=policy, clock=clock, reason=reason, on_settle=on_settle)
    except Exception as exc:
        _log.error("conversation_relay_not_queued", message_id=claimed.id, error=type(exc).__name__)
        changed.clear()  # rolled back
        return await settle_unsent(pool, claimed, policy=policy, clock=clock, reason=reason)


async def relay_message(pool: asyncpg.Pool, redis: aioredis.Redis | None, claimed: ClaimedMessage, *,
                        sender: Sender, kek: Kek, clock: Clock, policy: DeliveryPolicy,
                        throttle: Throttle | None = None, secrets: SecretSource | None = None,
                        on_changed: Changed | None = None) -> DeliveryReport | None:
    """One attempt at a relay message this process has claimed, and its consequence.

    ``claimed``: the writer's claim (`Posted.relay`) or a deliverer's. A delivered answer is
    recorded, a failed attempt queues the conversation for a person, both in the settle's
    transaction; then readers are woken (``on_changed``, else a Redis announcement when
    ``redis`` is given) and the answer's ``text-delta`` pieces are shown to streaming
    agents (best effort, display only).

    Raises:
        Exception: Whatever kept the consequence from being written: the attempt is then not
            settled either, and the relay is sent again once the claim's lease ends.
    """
    subject = _subject(claimed)
    changed: list[str] = []
    deltas: list[Any] = []

    async def consequence(conn: asyncpg.Connection, report: DeliveryReport, response: SenderResponse | None) -> None:
        if not report.recorded:
            return  # the claim was lost: the newer claim's attempt records its own answer
        now = clock()
        if report.state == "delivered" and response is not None:
            answer = _answer_of(response)  # `relay_accepts` passed
            if await _record(conn, report.tenant_id, subject, answer, body=response.body, now=now):
                changed.append(subject.conversation_id)
            deltas.extend(answer.deltas)
            return
        _log.warning("conversation_relay_failed", conversation_id=subject.conversation_id,
                     endpoint_id=report.endpoint_id, message_id=report.message_id, status=report.status,
                     error_class=report.error_class, state=report.state)
        # No attempt follows: a person is asked for, unless this relay's answer was recorded
        # already (a redelivery or a recovery of an answered relay failing changes nothing).
        if report.state != "pending" and not await store.relay_answered(conn, report.tenant_id,
                                                                        subject.conversation_id, subject.event_id):
            queued = await store.queue_for_person(conn, report.tenant_id, subject.conversation_id, now=now)
            if queued is not None:
                changed.append(subject.conversation_id)
        if report.endpoint_disabled:  # this attempt disabled the endpoint: its other waiting relays cannot be sent
            changed.extend(await queue_stranded_relays(conn, report.tenant_id, report.endpoint_id, now=now))

    report: DeliveryReport | None
    if claimed.attempt > MAX_RELAY_CLAIMS:
        report = await _give_up(pool, claimed, policy=relay_policy(policy), clock=clock, on_settle=consequence,
                                changed=changed)
    else:
        try:
            report = await deliver(pool, claimed.id, sender=sender, kek=kek, clock=clock, policy=relay_policy(policy),
                                   tenant_id=claimed.tenant_id, accept=relay_accepts, throttle=throttle,
                                   on_settle=consequence, claimed=claimed, secrets=secrets)
        except Exception as exc:  # not settled: claimed again after the lease, up to MAX_RELAY_CLAIMS
            _log.error("conversation_relay_not_settled", conversation_id=subject.conversation_id,
                       message_id=claimed.id, attempt=claimed.attempt, error=type(exc).__name__)
            raise
    if redis is not None:
        for delta in deltas:  # PAP-7.6-01: display only; never in the event log
            try:
                await publish_delta(redis, claimed.tenant_id, subject.conversation_id, delta.message_id, delta.text)
            except Exception:
                _log.warning("conversation_relay_delta_not_shown", conversation_id=subject.conversation_id)
    for cid in changed:  # committed: wake whoever reads the conversation
        try:
            if on_changed is not None:
                await on_changed(claimed.tenant_id, cid)
            elif redis is not None:
                await publish_changed(redis, claimed.tenant_id, cid)
        except Exception:  # best effort: readers re-read when their wait ends
            _log.warning("conversation_relay_wakeup_failed", conversation_id=cid)
    return report
