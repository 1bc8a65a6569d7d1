"""The personal agents a tenant has seen, and the ones it blocked.

The token endpoint calls `record_seen` for every authenticated agent; it writes at most
once a minute per agent (unless the agent's name or logo changed), so the hot path is one
indexed read. A blocked agent is a row with ``blocked_at``; an admin may block a
``client_id`` that never called, which creates a row without first/last seen. Blocking
does not end existing Sessions: the caller revokes them in the same transaction (the
sessions library owns them).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import asyncpg
import msgspec
from frontdoor_core.errors import Invalid

from frontdoor_identity.client_metadata import check_client_id
from frontdoor_identity.errors import InvalidClientMetadata

__all__ = [
    "MAX_PAGE",
    "SEEN_WRITE_INTERVAL",
    "Agent",
    "AgentCursor",
    "block_agent",
    "get_agent",
    "list_agents",
    "record_seen",
    "require_client_id_url",
    "unblock_agent",
]

SEEN_WRITE_INTERVAL: Final = timedelta(minutes=1)
"""Least time between two writes of an agent's ``last_seen_at``."""

MAX_PAGE: Final = 200
"""Most agents one `list_agents` call returns."""

_COLUMNS: Final = (
    "client_id, client_name, logo_uri, first_seen_at, last_seen_at, blocked_at,"
    # the tenant's own record of its simulator's client_ids (the console registers each before use)
    " EXISTS (SELECT 1 FROM simulator_client_ids s WHERE s.tenant_id = agents.tenant_id"
    " AND s.client_id = agents.client_id) AS simulator"
)


class AgentCursor(msgspec.Struct, frozen=True, kw_only=True):
    """Where a page of `list_agents` ended: pass it back as ``after`` for the next page."""

    last_seen_at: datetime | None
    client_id: str


class Agent(msgspec.Struct, frozen=True, kw_only=True):
    """A personal agent as a tenant knows it.

    Attributes:
        client_id: The agent's identifier (its metadata URL).
        client_name: Its name as its metadata last said; None if never seen.
        logo_uri: Its logo as its metadata last said, if any.
        first_seen_at: First authenticated request; None if blocked before it called.
        last_seen_at: Latest authenticated request, to the minute.
        blocked_at: When the tenant blocked it; None when not blocked.
        simulator: True for the dashboard's agent simulator (a client_id recorded in
            ``simulator_client_ids``): Frontdoor itself, testing the tenant's setup, not an
            agent bringing it users.
    """

    client_id: str
    client_name: str | None
    logo_uri: str | None
    first_seen_at: datetime | None
    last_seen_at: datetime | None
    blocked_at: datetime | None
    simulator: bool = False

    @property
    def blocked(self) -> bool:
        """Whether the tenant refuses this agent."""
        return self.blocked_at is not None

    @property
    def cursor(self) -> AgentCursor:
        """The cursor of the page ending with this agent."""
        return AgentCursor(last_seen_at=self.last_seen_at, client_id=self.client_id)


def require_client_id_url(client_id: str) -> str:
    """Return ``client_id`` if an admin may list it: an agent's metadata URL.

    Plain ``http`` to a loopback host is accepted too (a development agent); production
    never authenticates such a client, so the entry is inert there.

    Args:
        client_id: What the admin entered.

    Returns:
        ``client_id`` unchanged.

    Raises:
        Invalid: ``invalid_client_id``.
    """
    try:
        return check_client_id(client_id, allow_http_loopback=True)
    except InvalidClientMetadata:
        raise Invalid(
            "invalid_client_id",
            "A client_id is the https:// URL of the agent's metadata document.",
            fields={"client_id": "must be an https:// URL without credentials or fragment"},
        ) from None


def _agent(row: asyncpg.Record) -> Agent:
    return Agent(
        client_id=row["client_id"],
        client_name=row["client_name"],
        logo_uri=row["logo_uri"],
        first_seen_at=row["first_seen_at"],
        last_seen_at=row["last_seen_at"],
        blocked_at=row["blocked_at"],
        simulator=bool(row["simulator"]),
    )


_RECORD_SEEN: Final = """
WITH recent AS (
    SELECT 1 FROM agents
    WHERE tenant_id = $1 AND client_id = $2
      AND last_seen_at > $5::timestamptz - $6::interval
      AND client_name IS NOT DISTINCT FROM $3 AND logo_uri IS NOT DISTINCT FROM $4
)
INSERT INTO agents AS a (tenant_id, client_id, client_name, logo_uri, first_seen_at, last_seen_at)
SELECT $1::text, $2::text, $3::text, $4::text, $5::timestamptz, $5::timestamptz WHERE NOT EXISTS (SELECT 1 FROM recent)
ON CONFLICT (tenant_id, client_id) DO UPDATE SET
    client_name = EXCLUDED.client_name,
    logo_uri = EXCLUDED.logo_uri,
    first_seen_at = coalesce(a.first_seen_at, EXCLUDED.first_seen_at),
    last_seen_at = greatest(a.last_seen_at, EXCLUDED.last_seen_at)
WHERE a.last_seen_at IS NULL
   OR a.last_seen_at <= EXCLUDED.last_seen_at - $6::interval
   OR a.client_name IS DISTINCT FROM EXCLUDED.client_name
   OR a.logo_uri IS DISTINCT FROM EXCLUDED.logo_uri
RETURNING 1
"""


async def record_seen(
    conn: asyncpg.Connection,
    tenant_id: str,
    client_id: str,
    *,
    name: str | None,
    logo: str | None,
    now: datetime,
) -> bool:
    """Note that an authenticated agent called; cheap when it called within the minute.

    Args:
        conn: A connection (the caller's transaction, if any).
        tenant_id: The tenant called.
        client_id: The agent, already resolved and authenticated.
        name: Its ``client_name``.
        logo: Its ``logo_uri``.
        now: The request time.

    Returns:
        Whether a row was written (first sighting, a minute passed, or name/logo changed).
    """
    row = await conn.fetchval(_RECORD_SEEN, tenant_id, client_id, name, logo, now, SEEN_WRITE_INTERVAL)
    return row is not None


_RECORD_SEEN_DELEGATED: Final = """
INSERT INTO agents AS a (tenant_id, client_id, client_name, logo_uri, first_seen_at, last_seen_at)
VALUES ($1, $2, $3, NULL, $4, $4)
ON CONFLICT (tenant_id, client_id) DO UPDATE SET
    client_name = coalesce(EXCLUDED.client_name, a.client_name),
    first_seen_at = coalesce(a.first_seen_at, EXCLUDED.first_seen_at),
    last_seen_at = greatest(a.last_seen_at, EXCLUDED.last_seen_at)
WHERE a.last_seen_at IS NULL
   OR a.last_seen_at <= EXCLUDED.last_seen_at - $5::interval
   OR (EXCLUDED.client_name IS NOT NULL AND a.client_name IS DISTINCT FROM EXCLUDED.client_name)
RETURNING 1
"""


async def record_seen_delegated(conn: asyncpg.Connection, tenant_id: str, client_id: str, *, name: str | None,
                                now: datetime) -> bool:
    """Note that a PAP 1.0 agent called a company (its Session state was asked for).

    Like `record_seen`, but what a 1.0 caller offers is thinner: the name only when its
    document has one (a signed-out agent needs only ``client_id`` and ``jwks_uri``), and
    no logo, so neither overwrites what a sign-in or a 0.2 Session recorded with nothing.

    Returns:
        Whether a row was written (first sighting, a minute passed, or a new name).
    """
    row = await conn.fetchval(_RECORD_SEEN_DELEGATED, tenant_id, client_id, name, now, SEEN_WRITE_INTERVAL)
    return row is not None


async def get_agent(conn: asyncpg.Connection, tenant_id: str, client_id: str) -> Agent | None:
    """One agent of the tenant, or None if it was never seen nor blocked there."""
    row = await conn.fetchrow(
        f"SELECT {_COLUMNS} FROM agents WHERE tenant_id = $1 AND client_id = $2",  # noqa: S608 - constant columns
        tenant_id,
        client_id,
    )
    return _agent(row) if row is not None else None


async def list_agents(
    conn: asyncpg.Connection,
    tenant_id: str,
    *,
    blocked: bool | None = None,
    limit: int = 50,
    after: AgentCursor | None = None,
) -> list[Agent]:
    """The tenant's agents, most recently seen first (never-seen blocked ones last).

    Args:
        conn: A connection.
        tenant_id: The tenant.
        blocked: Only blocked (True) or only not blocked (False) agents; all when None.
        limit: Page size, 1 to `MAX_PAGE`.
        after: The ``cursor`` of the previous page's last agent.

    Returns:
        Up to ``limit`` agents.
    """
    limit = max(1, min(limit, MAX_PAGE))
    after_seen = None if after is None else after.last_seen_at
    after_id = None if after is None else after.client_id
    rows = await conn.fetch(
        f"""
        SELECT {_COLUMNS} FROM agents
        WHERE tenant_id = $1
          AND ($2::boolean IS NULL OR (blocked_at IS NOT NULL) = $2)
          AND ($4::text IS NULL
               OR (coalesce(last_seen_at, '-infinity'::timestamptz), client_id)
                  < (coalesce($3::timestamptz, '-infinity'::timestamptz), $4))
        ORDER BY coalesce(last_seen_at, '-infinity'::timestamptz) DESC, client_id DESC
        LIMIT $5
        """,  # noqa: S608 - constant columns
        tenant_id,
        blocked,
        after_seen,
        after_id,
        limit,
    )
    return [_agent(row) for row in rows]


async def block_agent(conn: asyncpg.Connection, tenant_id: str, client_id: str, now: datetime) -> bool:
    """Refuse this agent from now on in this tenant; the caller revokes its tokens.

    Args:
        conn: The caller's transaction (the same one that revokes the agent's Sessions).
        tenant_id: The tenant.
        client_id: The agent, seen or not.
        now: The blocking time.

    Returns:
        Whether anything changed (False when it was already blocked).

    Raises:
        Invalid: ``invalid_client_id``.
    """
    require_client_id_url(client_id)
    row = await conn.fetchval(
        """
        INSERT INTO agents AS a (tenant_id, client_id, blocked_at) VALUES ($1, $2, $3)
        ON CONFLICT (tenant_id, client_id) DO UPDATE SET blocked_at = EXCLUDED.blocked_at
        WHERE a.blocked_at IS NULL
        RETURNING 1
        """,
        tenant_id,
        client_id,
        now,
    )
    return row is not None


async def unblock_agent(conn: asyncpg.Connection, tenant_id: str, client_id: str) -> bool:
    """Accept this agent again (subject to the tenant's mode and allowlist).

    A row that existed only to block a never-seen agent is deleted.

    Args:
        conn: A connection.
        tenant_id: The tenant.
        client_id: The agent.

    Returns:
        Whether anything changed (False when it was not blocked in this tenant).
    """
    changed = await conn.fetchval(
        """
        WITH dropped AS (
            DELETE FROM agents
            WHERE tenant_id = $1 AND client_id = $2 AND blocked_at IS NOT NULL AND first_seen_at IS NULL
            RETURNING 1
        ), cleared AS (
            UPDATE agents SET blocked_at = NULL
            WHERE tenant_id = $1 AND client_id = $2 AND blocked_at IS NOT NULL AND first_seen_at IS NOT NULL
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM dropped) + (SELECT count(*) FROM cleared)
        """,
        tenant_id,
        client_id,
    )
    return bool(changed)
