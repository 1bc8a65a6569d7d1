"""Disconnect from the company's side (PAP §4.9): an account from one agent or from all,
or an agent from every account.

Every live sign-in matching is revoked through `revoke_sign_ins` (tokens revoked,
Sessions signed out, events written) and one audit row records who did it: an admin or
management API key from the console, or the company's own servers (resource-server
credential) from its account pages. Runs in the caller's transaction.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .revocation import RevocationSummary, revoke_sign_ins

__all__ = ["MAX_ACCOUNT_ID", "disconnect_account", "disconnect_agent"]

MAX_ACCOUNT_ID = 255


async def disconnect_account(conn: asyncpg.Connection, actor: Actor, *, account_id: str, client_id: str | None,
                             now: datetime, via: str) -> RevocationSummary:
    """Revoke every sign-in of ``account_id`` (only ``client_id``'s when given)."""
    ids = [r["id"] for r in await conn.fetch(
        "SELECT id FROM sign_ins WHERE tenant_id = $1 AND account_id = $2 AND ($3::text IS NULL OR client_id = $3)"
        " AND revoked_at IS NULL FOR UPDATE",
        actor.tenant_id, account_id, client_id)]
    done = await revoke_sign_ins(conn, actor.tenant_id, ids, now=now, reason="disconnected")
    await audit.record(conn, actor, "account.disconnected", target_type="account", target_id=account_id,
                       details={"client_id": client_id, "via": via, **msgspec.structs.asdict(done)})
    return done


async def disconnect_agent(conn: asyncpg.Connection, actor: Actor, *, client_id: str, now: datetime,
                           via: str) -> RevocationSummary:
    """Revoke every sign-in of an agent, whatever the account (its Sessions stay, signed out)."""
    ids = [r["id"] for r in await conn.fetch(
        "SELECT id FROM sign_ins WHERE tenant_id = $1 AND client_id = $2 AND revoked_at IS NULL FOR UPDATE",
        actor.tenant_id, client_id)]
    done = await revoke_sign_ins(conn, actor.tenant_id, ids, now=now, reason="agent_tokens_revoked")
    await audit.record(conn, actor, "agent.tokens_revoked", target_type="agent", target_id=client_id,
                       details={"via": via, **msgspec.structs.asdict(done)})
    return done
