"""The agents connected to one account: what a company's "connected agents" page lists.

An agent is connected to an account while one of its sign-ins to that account is live
(not revoked: its Account Tokens still refresh). Read-only over ``sign_ins`` and
``account_tokens``, with the agent's display name from the agents the tenant has seen.
Disconnecting is `disconnect.disconnect_account`.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

__all__ = ["ConnectedAgent", "connected_agents"]

MAX_LISTED = 200


class ConnectedAgent(msgspec.Struct, frozen=True, kw_only=True):
    """One agent with at least one live sign-in to the account.

    Attributes:
        client_id: The agent (its metadata URL).
        client_name: Its display name as its metadata last said; the agent's words, not
            Frontdoor's (escape it). None if Frontdoor never recorded it.
        logo_uri: Its logo URL, if its metadata names one.
        scope: Every scope the user granted it across its live sign-ins, space-separated.
        connected_at: When its oldest live sign-in happened.
        last_signed_in_at: When its newest live sign-in happened.
        last_refreshed_at: When it last got an Account Token (a sign-in or a refresh).
        sign_ins: How many live sign-ins it has (one per device or Session family).
        simulator: True for the dashboard's agent simulator (a client_id the tenant's simulator
            acts under, ``simulator_client_ids``): a test user the company's admin signed in
            from the dashboard, not an agent the user chose; the company may hide it or mark it.
    """

    client_id: str
    client_name: str | None
    logo_uri: str | None
    scope: str
    connected_at: datetime
    last_signed_in_at: datetime
    last_refreshed_at: datetime
    sign_ins: int
    simulator: bool = False


_QUERY = """
SELECT s.client_id,
       a.client_name,
       a.logo_uri,
       array_agg(s.scope ORDER BY s.created_at) AS scopes,
       min(s.created_at) AS connected_at,
       max(s.created_at) AS last_signed_in_at,
       coalesce(max(t.last_token_at), max(s.created_at)) AS last_refreshed_at,
       count(*) AS sign_ins,
       EXISTS (SELECT 1 FROM simulator_client_ids m WHERE m.tenant_id = $1 AND m.client_id = s.client_id) AS simulator
  FROM sign_ins s
  LEFT JOIN LATERAL (SELECT max(created_at) AS last_token_at FROM account_tokens
                      WHERE tenant_id = s.tenant_id AND sign_in_id = s.id) t ON true
  LEFT JOIN agents a ON a.tenant_id = s.tenant_id AND a.client_id = s.client_id
 WHERE s.tenant_id = $1 AND s.account_id = $2 AND s.revoked_at IS NULL
 GROUP BY s.client_id, a.client_name, a.logo_uri
 ORDER BY max(s.created_at) DESC, s.client_id
 LIMIT $3
"""


def _union(scopes: list[str]) -> str:
    out: list[str] = []
    for scope in scopes:
        out.extend(s for s in scope.split() if s not in out)
    return " ".join(out)


async def connected_agents(conn: asyncpg.Connection, tenant_id: str, account_id: str, *,
                           limit: int = MAX_LISTED) -> list[ConnectedAgent]:
    """The agents connected to ``account_id``, most recently signed in first (at most ``limit``)."""
    rows = await conn.fetch(_QUERY, tenant_id, account_id, max(1, min(limit, MAX_LISTED)))
    return [ConnectedAgent(client_id=r["client_id"], client_name=r["client_name"], logo_uri=r["logo_uri"],
                           scope=_union(list(r["scopes"])), connected_at=r["connected_at"],
                           last_signed_in_at=r["last_signed_in_at"], last_refreshed_at=r["last_refreshed_at"],
                           sign_ins=int(r["sign_ins"]), simulator=bool(r["simulator"]))
            for r in rows]
