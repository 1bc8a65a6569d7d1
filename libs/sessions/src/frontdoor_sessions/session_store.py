"""The ``pap_sessions`` repository. Every query is scoped by ``tenant_id``."""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
from frontdoor_core.ids import new_id
from frontdoor_identity.agent_policy import ALLOWED_SQL

__all__ = [
    "SessionRecord",
    "SignedOutSession",
    "create_session",
    "create_session_if_allowed",
    "end_sessions_of_agent",
    "find_session",
    "find_session_of_allowed_agent",
    "sign_in_session",
    "sign_out_sessions",
    "touch_session",
]


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A Session as stored."""

    tenant_id: str
    id: str
    client_id: str
    user_id: str
    created_at: datetime
    last_used_at: datetime
    ended_at: datetime | None
    signed_in_at: datetime | None
    account_id: str | None
    scope: str | None
    bound_account: str | None = None
    sign_in_id: str | None = None
    profile: str = "0.2"  # "1.0" for a Session the agent named (ADR 0004 §5)

    @property
    def live(self) -> bool:
        return self.ended_at is None

    @property
    def signed_in(self) -> bool:
        return self.signed_in_at is not None and self.account_id is not None


_COLS = ("tenant_id, id, client_id, user_id, created_at, last_used_at, ended_at, signed_in_at, account_id, scope,"
         " bound_account, sign_in_id, profile")


def _rec(row: asyncpg.Record) -> SessionRecord:
    return SessionRecord(**dict(row))


async def create_session(conn: asyncpg.Connection, tenant_id: str, client_id: str, user_id: str, *,
                         now: datetime) -> SessionRecord:
    """A new signed-out Session (PAP-4.2-01)."""
    row = await conn.fetchrow(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
        " VALUES ($1, $2, $3, $4, $5, $5) RETURNING " + _COLS,
        tenant_id, new_id("ses"), client_id, user_id, now,
    )
    return _rec(row)


async def create_session_if_allowed(conn: asyncpg.Connection, tenant_id: str, client_id: str, user_id: str, *,
                                    now: datetime) -> SessionRecord | None:
    """A new signed-out Session (PAP-4.2-01), or None when the tenant's agent policy refuses the agent.

    One statement: the policy (`frontdoor_identity.ALLOWED_SQL`: blocklist, open or
    allowlist mode) is read by the ``INSERT`` itself, so a block applies to the next
    request and nothing is written for a refused agent.
    """
    row = await conn.fetchrow(
        "INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at)"
        " SELECT $1, $3, $2, $4, $5, $5 WHERE " + ALLOWED_SQL + " RETURNING " + _COLS,
        tenant_id, client_id, new_id("ses"), user_id, now,
    )
    return None if row is None else _rec(row)


async def find_session(conn: asyncpg.Connection, tenant_id: str, session_id: str) -> SessionRecord | None:
    """The Session by ID within the tenant, or None."""
    row = await conn.fetchrow("SELECT " + _COLS + " FROM pap_sessions WHERE tenant_id = $1 AND id = $2",
                              tenant_id, session_id)
    return None if row is None else _rec(row)


async def find_session_of_allowed_agent(conn: asyncpg.Connection, tenant_id: str, session_id: str,
                                       client_id: str) -> SessionRecord | None:
    """The Session by ID within the tenant, or None: also when the agent policy refuses ``client_id``.

    One statement for a resource request's two checks: the Session and the tenant's agent
    policy (`frontdoor_identity.ALLOWED_SQL`: blocklist, open or allowlist mode), read
    together so a block applies to the next request. The caller still checks that the
    Session is ``client_id``'s.
    """
    row = await conn.fetchrow("SELECT " + _COLS + " FROM pap_sessions WHERE tenant_id = $1 AND id = $3 AND "
                              + ALLOWED_SQL, tenant_id, client_id, session_id)
    return None if row is None else _rec(row)


async def find_delegated_session(conn: asyncpg.Connection, tenant_id: str, client_id: str,
                                 agent_sid: str) -> SessionRecord | None:
    """The PAP 1.0 Session the agent ``client_id`` named ``agent_sid`` (ADR 0004 §5), or None."""
    row = await conn.fetchrow("SELECT " + _COLS + " FROM pap_sessions WHERE tenant_id = $1 AND client_id = $2"
                              " AND agent_sid = $3 AND profile = '1.0'", tenant_id, client_id, agent_sid)
    return None if row is None else _rec(row)


async def touch_session(conn: asyncpg.Connection, tenant_id: str, session_id: str, *, now: datetime) -> None:
    """Record use (renewal, introspection), at most about once a minute per Session."""
    await conn.execute(
        "UPDATE pap_sessions SET last_used_at = $3 WHERE tenant_id = $1 AND id = $2"
        " AND last_used_at < $3::timestamptz - interval '60 seconds'",
        tenant_id, session_id, now,
    )


async def end_sessions_of_agent(conn: asyncpg.Connection, tenant_id: str, client_id: str, *, now: datetime,
                                reason: str) -> int:
    """End every live Session of an agent (blocked agent): its tokens stop working."""
    result = await conn.execute(
        "UPDATE pap_sessions SET ended_at = $3, end_reason = $4"
        " WHERE tenant_id = $1 AND client_id = $2 AND ended_at IS NULL",
        tenant_id, client_id, now, reason,
    )
    return int(result.split()[-1])


async def sign_in_session(conn: asyncpg.Connection, tenant_id: str, session_id: str, *, account_id: str, scope: str,
                          sign_in_id: str, now: datetime) -> SessionRecord | None:
    """Sign a live Session in to ``account_id`` (compare-and-set on the bound account).

    ``bound_account`` is set by the first sign-in and never cleared; the update matches
    only while it is unset or the same account (PAP §4.4), so two concurrent sign-ins to
    different accounts cannot both win. None when nothing matched: the caller reads the
    Session to tell ``invalid_session`` from ``account_mismatch``.
    """
    row = await conn.fetchrow(
        "UPDATE pap_sessions SET signed_in_at = $3, account_id = $4, scope = $5, sign_in_id = $6,"
        " bound_account = coalesce(bound_account, $4), last_used_at = greatest(last_used_at, $3)"
        " WHERE tenant_id = $1 AND id = $2 AND ended_at IS NULL AND (bound_account IS NULL OR bound_account = $4)"
        " RETURNING " + _COLS,
        tenant_id, session_id, now, account_id, scope, sign_in_id,
    )
    return None if row is None else _rec(row)


class SignedOutSession(msgspec.Struct, frozen=True, kw_only=True):
    """A Session a sign-out just changed."""

    id: str
    client_id: str
    user_id: str
    sign_in_id: str


async def sign_out_sessions(conn: asyncpg.Connection, tenant_id: str, sign_in_ids: list[str]) -> list[SignedOutSession]:
    """Sign out every Session currently signed in from one of ``sign_in_ids`` (PAP §4.9).

    The Sessions stay live and keep their ``bound_account``: renewal gives a signed-out
    token and introspection answers ``signed_in: false`` from the next request on.
    """
    if not sign_in_ids:
        return []
    rows = await conn.fetch(
        "UPDATE pap_sessions SET signed_in_at = NULL, account_id = NULL, scope = NULL"
        " WHERE tenant_id = $1 AND sign_in_id = ANY($2::text[]) AND signed_in_at IS NOT NULL"
        " RETURNING id, client_id, user_id, sign_in_id",
        tenant_id, sign_in_ids,
    )
    return [SignedOutSession(**dict(r)) for r in rows]
