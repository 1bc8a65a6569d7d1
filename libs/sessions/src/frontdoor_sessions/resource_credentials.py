"""Resource-server credentials: how a company's API authenticates to introspection.

Format ``fdrs_<8-char id>_<secret>``; only the SHA-256 of the whole value is stored
(it is high-entropy, so a fast hash is right) and the prefix is kept for listing.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from datetime import datetime

import asyncpg
import msgspec
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_core.ids import new_id
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

__all__ = ["CreatedCredential", "CredentialView", "authenticate_credential", "create_credential", "credential_trusted",
           "identify_credential", "list_credentials", "revoke_credential"]

_SHAPE = re.compile(r"^fdrs_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{43}$")


class CredentialView(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class CreatedCredential(msgspec.Struct, frozen=True, kw_only=True):
    credential: CredentialView
    secret: str


def _hash(value: str) -> bytes:
    return hashlib.sha256(value.encode()).digest()


def _view(row: asyncpg.Record) -> CredentialView:
    return CredentialView(id=row["id"], name=row["name"], prefix=row["prefix"], created_at=row["created_at"],
                          last_used_at=row["last_used_at"], revoked_at=row["revoked_at"])


async def create_credential(conn: asyncpg.Connection, actor: Actor, name: str) -> CreatedCredential:
    """Issue a credential; the secret is returned once."""
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise Invalid("invalid_name", "The name must be 1 to 100 characters.", fields={"name": "1 to 100 characters"})
    prefix = "".join(secrets.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8))
    secret = f"fdrs_{prefix}_{secrets.token_urlsafe(32)}"
    cred_id = new_id("key")
    row = await conn.fetchrow(
        "INSERT INTO resource_credentials (tenant_id, id, name, prefix, secret_hash) VALUES ($1, $2, $3, $4, $5)"
        " RETURNING id, name, prefix, created_at, last_used_at, revoked_at",
        actor.tenant_id, cred_id, name, prefix, _hash(secret),
    )
    await audit.record(conn, actor, "resource_credential.created", target_type="resource_credential",
                       target_id=cred_id, details={"name": name, "prefix": prefix})
    return CreatedCredential(credential=_view(row), secret=secret)


async def list_credentials(conn: asyncpg.Connection, tenant_id: str, *, before: str | None = None,
                           limit: int | None = None) -> list[CredentialView]:
    """The tenant's credentials, newest first; keyset-paged by ID (``before``)."""
    rows = await conn.fetch(
        "SELECT id, name, prefix, created_at, last_used_at, revoked_at FROM resource_credentials"
        " WHERE tenant_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3", tenant_id, before, limit)
    return [_view(r) for r in rows]


async def revoke_credential(conn: asyncpg.Connection, actor: Actor, cred_id: str) -> CredentialView:
    row = await conn.fetchrow(
        "UPDATE resource_credentials SET revoked_at = coalesce(revoked_at, now()) WHERE tenant_id = $1 AND id = $2"
        " RETURNING id, name, prefix, created_at, last_used_at, revoked_at", actor.tenant_id, cred_id)
    if row is None:
        raise NotFound("credential_not_found", "No such credential.")
    forget_trusted_credentials()
    await audit.record(conn, actor, "resource_credential.revoked", target_type="resource_credential",
                       target_id=cred_id)
    return _view(row)


# Introspection runs on every company API call: a credential that proved valid is trusted
# for a few seconds in this process. Revocation therefore takes effect within _TRUST_S.
_TRUST_S = 10.0
_trusted: dict[tuple[str, bytes], float] = {}


def credential_trusted(tenant_id: str, presented: str) -> bool:
    """True when this process proved ``presented`` valid within the trust window (no I/O).

    False means "ask :func:`authenticate_credential`", not "refused".
    """
    if not _SHAPE.match(presented):
        return False
    seen = _trusted.get((tenant_id, _hash(presented)))
    return seen is not None and time.monotonic() - seen < _TRUST_S


async def authenticate_credential(conn: asyncpg.Connection, tenant_id: str, presented: str) -> bool:
    """True when ``presented`` is a live credential of this tenant (another tenant's is False)."""
    if not _SHAPE.match(presented):
        return False
    digest = _hash(presented)
    seen = _trusted.get((tenant_id, digest))
    if seen is not None and time.monotonic() - seen < _TRUST_S:
        return True
    row = await conn.fetchrow(
        "UPDATE resource_credentials SET last_used_at = now()"
        " WHERE tenant_id = $1 AND secret_hash = $2 AND revoked_at IS NULL RETURNING id",
        tenant_id, digest)
    if row is None:
        _trusted.pop((tenant_id, digest), None)
        return False
    if len(_trusted) > 10_000:
        _trusted.clear()
    _trusted[(tenant_id, digest)] = time.monotonic()
    return True


async def identify_credential(conn: asyncpg.Connection, tenant_id: str, presented: str) -> str | None:
    """The ID of the live credential ``presented`` of this tenant, or None (no in-process trust).

    For rare, audited calls (disconnect), where the audit row names the credential.
    """
    if not _SHAPE.match(presented):
        return None
    row = await conn.fetchrow(
        "UPDATE resource_credentials SET last_used_at = now()"
        " WHERE tenant_id = $1 AND secret_hash = $2 AND revoked_at IS NULL RETURNING id",
        tenant_id, _hash(presented))
    return None if row is None else str(row["id"])


def forget_trusted_credentials() -> None:
    """Drop the in-process trust (called when a credential is revoked here)."""
    _trusted.clear()
