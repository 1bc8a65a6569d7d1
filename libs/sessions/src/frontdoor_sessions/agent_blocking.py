"""Block and unblock an agent as one audited use case (management API and dashboard alike).

Blocking refuses the agent at the token endpoint from now on and ends its live Sessions
in the same transaction, so its tokens stop working on the very next request; the same
transaction writes the ``agent.blocked`` event.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
from frontdoor_identity import block_agent, unblock_agent
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .session_events import record_event
from .session_store import end_sessions_of_agent

__all__ = ["BlockOutcome", "block_and_end_sessions", "unblock"]


class BlockOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a block or unblock did.

    Attributes:
        client_id: the agent.
        blocked: whether it is blocked now.
        changed: False when it already was in that state.
        sessions_ended: live Sessions ended by this call (block only).
    """

    client_id: str
    blocked: bool
    changed: bool
    sessions_ended: int = 0


async def block_and_end_sessions(conn: asyncpg.Connection, actor: Actor, client_id: str, *,
                                 now: datetime) -> BlockOutcome:
    """Block ``client_id`` for the actor's tenant and end its live Sessions; audit a change.

    Run it inside a transaction; ``client_id`` must already be checked.
    """
    changed = await block_agent(conn, actor.tenant_id, client_id, now)
    ended = await end_sessions_of_agent(conn, actor.tenant_id, client_id, now=now, reason="agent_blocked")
    if changed:
        await audit.record(conn, actor, "agent.blocked", target_type="agent", target_id=client_id,
                           details={"sessions_ended": ended})
        await record_event(conn, actor.tenant_id, "agent.blocked",
                           {"client_id": client_id, "sessions_ended": ended}, now=now)
    return BlockOutcome(client_id=client_id, blocked=True, changed=changed, sessions_ended=ended)


async def unblock(conn: asyncpg.Connection, actor: Actor, client_id: str) -> BlockOutcome:
    """Unblock ``client_id`` for the actor's tenant; audit a change. Run it inside a transaction."""
    changed = await unblock_agent(conn, actor.tenant_id, client_id)
    if changed:
        await audit.record(conn, actor, "agent.unblocked", target_type="agent", target_id=client_id)
    return BlockOutcome(client_id=client_id, blocked=False, changed=changed)
