"""Management API keys: shown once, stored as a SHA-256 hash, listable by prefix, revocable."""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
import msgspec
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_core.ids import new_id

from . import audit
from .actor import Actor
from .credentials.api_key import hash_api_key, new_api_key, parse_api_key
from .roles import require, role_at_most

__all__ = ["ApiKeyView", "CreatedApiKey", "authenticate", "create_key", "list_keys", "revoke_key"]

# last_used_at is refreshed at most this often, so a busy key does not write on every call.
_TOUCH_EVERY = timedelta(minutes=1)


class ApiKeyView(msgspec.Struct, frozen=True, kw_only=True):
    """An API key as listed: never the secret, only its public prefix."""

    id: str
    name: str
    prefix: str
    role: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class CreatedApiKey(msgspec.Struct, frozen=True, kw_only=True):
    """A new key: ``api_key`` is the plaintext, returned exactly once."""

    key: ApiKeyView
    api_key: str


def _view(row: asyncpg.Record) -> ApiKeyView:
    return ApiKeyView(
        id=row["id"], name=row["name"], prefix=row["prefix"], role=row["role"], created_at=row["created_at"],
        last_used_at=row["last_used_at"], revoked_at=row["revoked_at"],
    )


async def create_key(conn: asyncpg.Connection, actor: Actor, name: str, *, role: str = "admin") -> CreatedApiKey:
    """Issue a key for the actor's tenant (owners only) acting with ``role``.

    A key never holds more than its creator: ``role`` must be at most the actor's role.
    """
    require(actor, "manage_api_keys")
    if not role_at_most(role, actor.role if actor.type != "system" else "owner"):
        raise Invalid("invalid_role", "The role must be owner, admin or viewer, and no more than yours.",
                      fields={"role": "owner, admin or viewer, at most your own role"})
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise Invalid("invalid_name", "The key name must be 1 to 100 characters.", fields={"name": "1 to 100 characters"})
    issued = new_api_key()
    key_id = new_id("key")
    row = await conn.fetchrow(
        """
        INSERT INTO api_keys (tenant_id, id, name, prefix, key_hash, created_by, role)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        RETURNING id, name, prefix, role, created_at, last_used_at, revoked_at
        """,
        actor.tenant_id, key_id, name, issued.prefix, issued.hash, actor.id, role,
    )
    await audit.record(conn, actor, "api_key.created", target_type="api_key", target_id=key_id,
                       details={"name": name, "prefix": issued.prefix, "role": role})
    return CreatedApiKey(key=_view(row), api_key=issued.plaintext)


async def list_keys(conn: asyncpg.Connection, tenant_id: str, *, before: str | None = None,
                    limit: int | None = None) -> list[ApiKeyView]:
    """The tenant's keys, newest first, revoked ones included; keyset-paged by ID (``before``)."""
    rows = await conn.fetch(
        """
        SELECT id, name, prefix, role, created_at, last_used_at, revoked_at
          FROM api_keys WHERE tenant_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3
        """,
        tenant_id, before, limit,
    )
    return [_view(r) for r in rows]


async def revoke_key(conn: asyncpg.Connection, actor: Actor, key_id: str) -> ApiKeyView:
    """Revoke a key now; revoking twice is harmless. Unknown (or another tenant's) key: 404."""
    require(actor, "manage_api_keys")
    row = await conn.fetchrow(
        """
        UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
         WHERE tenant_id = $1 AND id = $2
        RETURNING id, name, prefix, role, created_at, last_used_at, revoked_at
        """,
        actor.tenant_id, key_id,
    )
    if row is None:
        raise NotFound("api_key_not_found", "No such API key.")
    await audit.record(conn, actor, "api_key.revoked", target_type="api_key", target_id=key_id)
    return _view(row)


async def authenticate(conn: asyncpg.Connection, presented: str, *, now: datetime,
                       request_id: str | None = None) -> Actor | None:
    """The actor for a presented key, or None (malformed, unknown or revoked: one answer)."""
    if parse_api_key(presented) is None:
        return None
    row = await conn.fetchrow(
        "SELECT tenant_id, id, role, last_used_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        hash_api_key(presented),
    )
    if row is None:
        return None
    if row["last_used_at"] is None or now - row["last_used_at"] > _TOUCH_EVERY:
        await conn.execute(
            "UPDATE api_keys SET last_used_at = $3 WHERE tenant_id = $1 AND id = $2", row["tenant_id"], row["id"], now
        )
    return Actor(tenant_id=row["tenant_id"], type="api_key", id=row["id"], role=row["role"], request_id=request_id)
