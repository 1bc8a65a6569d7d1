"""Which personal agents a tenant accepts: open or allowlist mode, minus its blocklist.

``open`` (the default) accepts every agent that authenticates; ``allowlist`` only the
listed ``client_id``s. A blocked agent is refused in either mode: the blocklist wins. The
token endpoint refuses a refused agent with ``unauthorized_client``; the blocklist lives
in `frontdoor_identity.agents` (``blocked_at``), so blocking an agent the dashboard shows
and blocking a ``client_id`` typed in by hand are the same thing.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Final

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict

from frontdoor_identity.agents import require_client_id_url

__all__ = [
    "ALLOWED_SQL",
    "MAX_ALLOWLIST",
    "AgentPolicy",
    "PolicyMode",
    "allow_agent",
    "disallow_agent",
    "get_agent_policy",
    "is_allowed",
    "set_agent_policy_mode",
]

MAX_ALLOWLIST: Final = 1000
"""Most client_ids one tenant may allowlist."""


class PolicyMode(StrEnum):
    """Whether an unlisted agent is accepted."""

    OPEN = "open"
    """Every agent that authenticates, unless blocked."""
    ALLOWLIST = "allowlist"
    """Only allowlisted agents, unless blocked."""


class AgentPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant's agent policy, whole or as it concerns one client_id.

    Attributes:
        mode: ``open`` or ``allowlist``.
        allowlist: Allowlisted client_ids (kept in ``open`` mode too, for a later switch).
        blocklist: Blocked client_ids.
    """

    mode: PolicyMode = PolicyMode.OPEN
    allowlist: frozenset[str] = frozenset()
    blocklist: frozenset[str] = frozenset()


def is_allowed(policy: AgentPolicy, client_id: str) -> bool:
    """Whether ``policy`` accepts the agent ``client_id`` (compared exactly).

    Args:
        policy: The tenant's policy (`get_agent_policy`).
        client_id: The authenticated agent.

    Returns:
        False when blocked, or in ``allowlist`` mode when not listed; True otherwise.
    """
    if client_id in policy.blocklist:
        return False
    return policy.mode is PolicyMode.OPEN or client_id in policy.allowlist


ALLOWED_SQL: Final = (
    "(NOT EXISTS (SELECT 1 FROM agents WHERE tenant_id = $1 AND client_id = $2 AND blocked_at IS NOT NULL)"
    " AND (COALESCE((SELECT mode FROM agent_policies WHERE tenant_id = $1), 'open') = 'open'"
    " OR EXISTS (SELECT 1 FROM agent_allowlist WHERE tenant_id = $1 AND client_id = $2)))"
)
"""`is_allowed` as a SQL boolean expression of ``$1`` (the tenant) and ``$2`` (the client_id).

For a statement that acts only when the agent is allowed: the token endpoint puts it in
the ``INSERT`` of a new Session, so the policy is read by the write itself (one round
trip, and a block applies to the next request). Same rule as `is_allowed`: the blocklist
wins, then ``open`` mode or an allowlisted agent.
"""


_WHOLE: Final = """
SELECT (SELECT mode FROM agent_policies WHERE tenant_id = $1) AS mode,
       ARRAY(SELECT client_id FROM agent_allowlist WHERE tenant_id = $1) AS allowlist,
       ARRAY(SELECT client_id FROM agents WHERE tenant_id = $1 AND blocked_at IS NOT NULL) AS blocklist
"""

_FOR_CLIENT: Final = """
SELECT (SELECT mode FROM agent_policies WHERE tenant_id = $1) AS mode,
       ARRAY(SELECT client_id FROM agent_allowlist WHERE tenant_id = $1 AND client_id = $2) AS allowlist,
       ARRAY(SELECT client_id FROM agents
             WHERE tenant_id = $1 AND client_id = $2 AND blocked_at IS NOT NULL) AS blocklist
"""


async def get_agent_policy(conn: asyncpg.Connection, tenant_id: str, *, client_id: str | None = None) -> AgentPolicy:
    """Read the tenant's policy in one round trip.

    Args:
        conn: A connection.
        tenant_id: The tenant.
        client_id: When given, the lists hold at most this client_id: enough for
            `is_allowed` on the hot path, whatever the lists' sizes.

    Returns:
        The policy; ``open`` with empty lists for a tenant that never set one.
    """
    if client_id is None:
        row = await conn.fetchrow(_WHOLE, tenant_id)
    else:
        row = await conn.fetchrow(_FOR_CLIENT, tenant_id, client_id)
    assert row is not None  # a SELECT without FROM returns one row
    return AgentPolicy(
        mode=PolicyMode(row["mode"] or PolicyMode.OPEN),
        allowlist=frozenset(row["allowlist"]),
        blocklist=frozenset(row["blocklist"]),
    )


async def set_agent_policy_mode(conn: asyncpg.Connection, tenant_id: str, mode: PolicyMode, now: datetime) -> bool:
    """Switch the tenant between ``open`` and ``allowlist``.

    Args:
        conn: A connection.
        tenant_id: The tenant.
        mode: The new mode.
        now: The change time.

    Returns:
        Whether the effective mode changed.
    """
    row = await conn.fetchval(
        """
        INSERT INTO agent_policies AS p (tenant_id, mode, updated_at)
        SELECT $1::text, $2::text, $3::timestamptz
        WHERE $2::text <> 'open' OR EXISTS (SELECT 1 FROM agent_policies WHERE tenant_id = $1)
        ON CONFLICT (tenant_id) DO UPDATE SET mode = EXCLUDED.mode, updated_at = EXCLUDED.updated_at
        WHERE p.mode <> EXCLUDED.mode
        RETURNING 1
        """,
        tenant_id,
        mode.value,
        now,
    )
    return row is not None


async def allow_agent(conn: asyncpg.Connection, tenant_id: str, client_id: str, now: datetime) -> bool:
    """Add a client_id to the tenant's allowlist.

    Args:
        conn: A connection.
        tenant_id: The tenant.
        client_id: The agent's metadata URL.
        now: When it was added.

    Returns:
        Whether it was added (False when already listed).

    Raises:
        Invalid: ``invalid_client_id``.
        Conflict: ``allowlist_full`` at `MAX_ALLOWLIST` entries (checked without a lock:
            concurrent additions may pass it by a few).
    """
    require_client_id_url(client_id)
    added = await conn.fetchval(
        """
        INSERT INTO agent_allowlist (tenant_id, client_id, added_at)
        SELECT $1::text, $2::text, $3::timestamptz
        WHERE (SELECT count(*) FROM agent_allowlist WHERE tenant_id = $1) < $4
        ON CONFLICT (tenant_id, client_id) DO NOTHING
        RETURNING 1
        """,
        tenant_id,
        client_id,
        now,
        MAX_ALLOWLIST,
    )
    if added is not None:
        return True
    listed = await conn.fetchval(
        "SELECT 1 FROM agent_allowlist WHERE tenant_id = $1 AND client_id = $2", tenant_id, client_id
    )
    if listed is None:
        raise Conflict("allowlist_full", f"An allowlist holds at most {MAX_ALLOWLIST} agents.")
    return False


async def disallow_agent(conn: asyncpg.Connection, tenant_id: str, client_id: str) -> bool:
    """Remove a client_id from the tenant's allowlist.

    Returns:
        Whether it was listed.
    """
    removed = await conn.fetchval(
        "DELETE FROM agent_allowlist WHERE tenant_id = $1 AND client_id = $2 RETURNING 1", tenant_id, client_id
    )
    return removed is not None
