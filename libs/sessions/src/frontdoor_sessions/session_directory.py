"""The company's view of its Sessions: list, read one, revoke one (the admin dashboard).

Revoking a Session from the company's side ends it at once (its Session Tokens stop
working on the next request, as when its agent is blocked) and, when it is signed in,
revokes the sign-in it came from (`revoke_sign_ins`), so the Account Tokens of that
sign-in cannot sign a new Session in either. One audit row records who did it.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
from frontdoor_core.errors import NotFound
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .revocation import RevocationSummary, revoke_sign_ins
from .session_events import record_event

__all__ = ["MAX_LISTED", "SessionRow", "get_session", "list_sessions", "revoke_session"]

MAX_LISTED = 200


class SessionRow(msgspec.Struct, frozen=True, kw_only=True):
    """A Session as the dashboard shows it.

    Attributes:
        client_name: the agent's display name as its metadata said (the agent's words:
            escape it); None if never recorded.
        signed_in_at: when it was signed in to ``account_id``; None while signed out.
        scope: the scopes of that sign-in, space-separated.
        ended_at: when it ended (revoked, agent blocked); None while live.
        profile: ``0.2`` (a Session Token Session) or ``1.0`` (the agent names it, ADR 0004 §5).
        agent_sid: the agent's own ``sid`` of a 1.0 Session; ``agent_id`` its optional ``agent_id``.
    """

    id: str
    client_id: str
    client_name: str | None
    user_id: str
    created_at: datetime
    last_used_at: datetime
    signed_in_at: datetime | None
    account_id: str | None
    scope: str | None
    ended_at: datetime | None
    end_reason: str | None
    profile: str = "0.2"
    agent_sid: str | None = None
    agent_id: str | None = None

    @property
    def scopes(self) -> list[str]:
        return (self.scope or "").split()


_SELECT = """
SELECT s.id, s.client_id, a.client_name, s.user_id, s.created_at, s.last_used_at, s.signed_in_at, s.account_id,
       s.scope, s.ended_at, s.end_reason, s.profile, s.agent_sid, s.agent_id
  FROM pap_sessions s
  LEFT JOIN agents a ON a.tenant_id = s.tenant_id AND a.client_id = s.client_id
"""


async def list_sessions(conn: asyncpg.Connection, tenant_id: str, *, client_id: str | None = None,
                        account_id: str | None = None, live: bool = True, limit: int = 100) -> list[SessionRow]:
    """The tenant's Sessions, most recently used first, optionally of one agent and/or one account."""
    rows = await conn.fetch(
        _SELECT + """
         WHERE s.tenant_id = $1 AND ($2::text IS NULL OR s.client_id = $2) AND ($3::text IS NULL OR s.account_id = $3)
           AND (NOT $4 OR s.ended_at IS NULL)
         ORDER BY s.last_used_at DESC, s.id DESC
         LIMIT $5
        """,
        tenant_id, client_id, account_id, live, max(1, min(limit, MAX_LISTED)),
    )
    return [SessionRow(**dict(r)) for r in rows]


async def get_session(conn: asyncpg.Connection, tenant_id: str, session_id: str) -> SessionRow:
    """One Session of the tenant; `NotFound` for an unknown one or another tenant's."""
    row = await conn.fetchrow(_SELECT + " WHERE s.tenant_id = $1 AND s.id = $2", tenant_id, session_id)
    if row is None:
        raise NotFound("session_not_found", "No such Session.")
    return SessionRow(**dict(row))


async def revoke_session(conn: asyncpg.Connection, actor: Actor, session_id: str, *,
                         now: datetime) -> RevocationSummary:
    """End a Session now and revoke the sign-in it is signed in from. Run it in a transaction.

    Revoking an ended Session changes nothing and writes no audit row.
    """
    row = await conn.fetchrow(
        "SELECT id, client_id, sign_in_id, signed_in_at, ended_at FROM pap_sessions"
        " WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
        actor.tenant_id, session_id,
    )
    if row is None:
        raise NotFound("session_not_found", "No such Session.")
    if row["ended_at"] is not None:
        return RevocationSummary()
    done = RevocationSummary()
    if row["signed_in_at"] is not None and row["sign_in_id"] is not None:
        done = await revoke_sign_ins(conn, actor.tenant_id, [row["sign_in_id"]], now=now, reason="session_revoked")
    await conn.execute(
        "UPDATE pap_sessions SET ended_at = $3, end_reason = 'revoked' WHERE tenant_id = $1 AND id = $2",
        actor.tenant_id, session_id, now,
    )
    # Stream-only (ADR 0005): receivers holding this Session in memory must drop it.
    await record_event(conn, actor.tenant_id, "session.ended", {
        "session_id": session_id, "client_id": row["client_id"], "reason": "session_revoked"}, now=now)
    await audit.record(conn, actor, "session.revoked", target_type="session", target_id=session_id,
                       details={"client_id": row["client_id"], **msgspec.structs.asdict(done)}, at=now)
    return done
