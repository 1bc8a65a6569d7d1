"""Hosted PAP conversations (§7): a tenant's company agent and personal agents, through Frontdoor.

- :mod:`.rules`: §7's rules as pure functions (ownership, open/closed, Direct Conversations,
  message checks and idempotency, state changes), each citing its ``PAP-7.*`` requirement.
- :mod:`.store`: conversations, the ordered event log with opaque cursors and retention,
  message IDs once each, and the ``conversation.message.created`` webhook message written in
  the same transaction.
- :mod:`.inbox`: the dashboard's human handoff inbox (take over, reply, hand back, close,
  assignment, display names, transcripts), each use case audited.
- :mod:`.relay`: the relay mode's contract (the request to the company's own endpoint, the
  reading of its answer, the setting's check).
- :mod:`.retention`: forgetting events past each tenant's ``retention_days`` (a beat job).
- :mod:`.wakeups`: waking long polls and streams across processes through Redis, and the
  company's display-only text deltas.
"""

from .rules import MAX_MESSAGE_BYTES, MAX_WAIT_SECONDS, PAGE_SIZE, Caller, IncomingMessage, parse_message, parse_wait
from .store import HANDOFF_REQUESTED, MESSAGE_CREATED, Conversation, ConversationRefused, Page, Posted
from .wakeups import ConversationWaiters, publish_changed, publish_delta, recent_deltas

__all__ = [
    "HANDOFF_REQUESTED",
    "MAX_MESSAGE_BYTES",
    "MAX_WAIT_SECONDS",
    "MESSAGE_CREATED",
    "PAGE_SIZE",
    "Caller",
    "Conversation",
    "ConversationRefused",
    "ConversationWaiters",
    "IncomingMessage",
    "Page",
    "Posted",
    "parse_message",
    "parse_wait",
    "publish_changed",
    "publish_delta",
    "recent_deltas",
]
