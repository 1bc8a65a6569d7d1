"""The accounts that agents are connected to (the dashboard's Accounts page).

An account is connected while one of its sign-ins is live (not revoked). Read-only; one
account's agents are `connected_agents`, disconnecting is `disconnect.disconnect_account`.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

__all__ = ["ConnectedAccount", "connected_accounts"]

MAX_LISTED = 200


class ConnectedAccount(msgspec.Struct, frozen=True, kw_only=True):
    """An account with at least one live sign-in."""

    account_id: str
    agents: int
    sign_ins: int
    last_signed_in_at: datetime


async def connected_accounts(conn: asyncpg.Connection, tenant_id: str, *, search: str | None = None,
                             limit: int = 100) -> list[ConnectedAccount]:
    """Accounts with live sign-ins, most recently signed in first; ``search`` matches a prefix of the ID."""
    rows = await conn.fetch(
        """
        SELECT account_id, count(DISTINCT client_id) AS agents, count(*) AS sign_ins,
               max(created_at) AS last_signed_in_at
          FROM sign_ins
         WHERE tenant_id = $1 AND revoked_at IS NULL
           AND ($2::text IS NULL OR starts_with(account_id, $2))
         GROUP BY account_id
         ORDER BY max(created_at) DESC, account_id
         LIMIT $3
        """,
        tenant_id, search or None, max(1, min(limit, MAX_LISTED)),
    )
    return [ConnectedAccount(account_id=r["account_id"], agents=int(r["agents"]), sign_ins=int(r["sign_ins"]),
                             last_signed_in_at=r["last_signed_in_at"]) for r in rows]
