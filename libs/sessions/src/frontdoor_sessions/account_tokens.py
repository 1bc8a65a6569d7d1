"""Account Tokens (PAP §4.8): opaque refresh tokens, stored only as a hash.

Format ``fdat_`` + 256 random bits (base64url, 43 characters). The value is never stored
or logged; a lookup hashes what was presented (SHA-256: the value has full entropy, so a
fast hash is right) and always scopes by tenant, so a token of tenant A is unknown at B.
A token is never a JWT, so it can never pass for a Session Token at introspection or an
API (PAP-4.8-01).

Every token belongs to one sign-in (its *family*); rotation marks the old token
``replaced_at`` and issues a new one in the same family.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime

import asyncpg
import msgspec

from .record_ids import new_record_id

__all__ = [
    "AccountTokenRecord",
    "find_account_token",
    "insert_account_token",
    "looks_like_account_token",
    "mark_replaced",
    "new_account_token_value",
    "revoke_tokens_of_sign_ins",
    "token_hash",
]

_PREFIX = "fdat_"
_SHAPE = re.compile(r"^fdat_[A-Za-z0-9_-]{43}$")


class AccountTokenRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An Account Token as stored (without its value)."""

    tenant_id: str
    id: str
    sign_in_id: str
    client_id: str
    user_id: str | None  # None for a 1.0 sign-in, which is independent of Session identity
    account_id: str
    scope: str
    created_at: datetime
    replaced_at: datetime | None
    revoked_at: datetime | None

    @property
    def usable(self) -> bool:
        return self.replaced_at is None and self.revoked_at is None


_FIND = ("SELECT tenant_id, id, sign_in_id, client_id, user_id, account_id, scope, created_at, replaced_at, revoked_at"
         " FROM account_tokens WHERE tenant_id = $1 AND token_hash = $2")
_FIND_FOR_UPDATE = _FIND + " FOR UPDATE"


def new_account_token_value() -> str:
    """A fresh token value: returned to the agent once, never stored."""
    return _PREFIX + secrets.token_urlsafe(32)


def looks_like_account_token(value: str) -> bool:
    """Whether ``value`` has the shape of an Account Token (cheap pre-check)."""
    return _SHAPE.fullmatch(value) is not None


def token_hash(value: str) -> bytes:
    """What is stored and looked up for ``value``."""
    return hashlib.sha256(value.encode()).digest()


async def insert_account_token(conn: asyncpg.Connection, tenant_id: str, *, sign_in_id: str, client_id: str,
                               user_id: str | None, account_id: str, scope: str, now: datetime) -> tuple[str, str]:
    """Store a new token of the sign-in; return ``(id, value)``; the value exists only here."""
    value = new_account_token_value()
    token_id = new_record_id("atk")
    await conn.execute(
        "INSERT INTO account_tokens (tenant_id, id, sign_in_id, token_hash, client_id, user_id, account_id, scope,"
        " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        tenant_id, token_id, sign_in_id, token_hash(value), client_id, user_id, account_id, scope, now,
    )
    return token_id, value


async def find_account_token(conn: asyncpg.Connection, tenant_id: str, value: str, *,
                             for_update: bool = False) -> AccountTokenRecord | None:
    """The token presented as ``value`` within the tenant, or None (unknown, malformed, other tenant's).

    ``for_update`` locks the row until the caller's transaction ends, so concurrent
    refreshes of one token are serialised and the second sees it replaced.
    """
    if not looks_like_account_token(value):
        return None
    row = await conn.fetchrow(_FIND_FOR_UPDATE if for_update else _FIND, tenant_id, token_hash(value))
    return None if row is None else AccountTokenRecord(**dict(row))


async def mark_replaced(conn: asyncpg.Connection, tenant_id: str, token_id: str, *, now: datetime) -> bool:
    """Compare-and-set: retire a usable token on rotation; False when it no longer was."""
    row = await conn.fetchrow(
        "UPDATE account_tokens SET replaced_at = $3 WHERE tenant_id = $1 AND id = $2"
        " AND replaced_at IS NULL AND revoked_at IS NULL RETURNING id",
        tenant_id, token_id, now,
    )
    return row is not None


async def revoke_tokens_of_sign_ins(conn: asyncpg.Connection, tenant_id: str, sign_in_ids: list[str], *,
                                    now: datetime) -> int:
    """Revoke every not yet revoked token of the families; return how many."""
    if not sign_in_ids:
        return 0
    result = await conn.execute(
        "UPDATE account_tokens SET revoked_at = $3 WHERE tenant_id = $1 AND sign_in_id = ANY($2::text[])"
        " AND revoked_at IS NULL",
        tenant_id, sign_in_ids, now,
    )
    return int(result.split()[-1])
