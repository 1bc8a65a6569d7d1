"""Operation kinds: tenant configuration of what agents may be asked to confirm.

A kind names the scopes a confirm needs, the default and maximum time a proposal stays
open, the webhook endpoint that performs it, and optionally an endpoint asked for current
terms at confirm time (re-pricing). Every query is scoped by ``tenant_id``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Final

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_protocol.scopes import is_scope_token
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

__all__ = ["ConfirmTargets", "Kind", "KindInput", "confirm_targets", "delete_kind", "get_kind", "has_kinds",
           "is_kind_name", "list_kinds", "perform_endpoint_enabled", "put_kind"]

_NAME: Final = re.compile(r"^[a-z][a-z0-9_.:-]{0,63}$")
MIN_EXPIRY: Final = 30
MAX_EXPIRY: Final = 30 * 86400


class Kind(msgspec.Struct, frozen=True, kw_only=True):
    """One operation kind as stored."""

    name: str
    description: str
    scopes: list[str]
    default_expiry_seconds: int
    max_expiry_seconds: int
    perform_endpoint_id: str
    reprice_endpoint_id: str | None
    created_at: datetime
    updated_at: datetime


class KindInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What an admin sets for a kind (``PUT /api/v1/operation-kinds/{name}``)."""

    perform_endpoint_id: str
    description: str = ""
    scopes: list[str] = msgspec.field(default_factory=list)
    default_expiry_seconds: int = 900
    max_expiry_seconds: int = 86400
    reprice_endpoint_id: str | None = None


_COLS: Final = ("name, description, scopes, default_expiry_seconds, max_expiry_seconds, perform_endpoint_id,"
                " reprice_endpoint_id, created_at, updated_at")


def _kind(row: asyncpg.Record) -> Kind:
    return Kind(**dict(row))


def is_kind_name(value: str) -> bool:
    """Whether ``value`` is a well-formed kind name (anything else names no kind)."""
    return _NAME.match(value) is not None and "\n" not in value


def _validate(name: str, data: KindInput) -> None:
    if not is_kind_name(name):
        raise Invalid("invalid_kind", "A kind name is 1 to 64 of a-z, 0-9, '_', '.', ':', '-', starting with a letter.")
    if len(data.description) > 500:
        raise Invalid("invalid_description", "description is at most 500 characters.")
    if len(data.scopes) > 20 or any(not isinstance(s, str) or not is_scope_token(s) for s in data.scopes):
        raise Invalid("invalid_scope", "scopes must be up to 20 scope tokens.")
    for field, value in (("default_expiry_seconds", data.default_expiry_seconds),
                         ("max_expiry_seconds", data.max_expiry_seconds)):
        if not MIN_EXPIRY <= value <= MAX_EXPIRY:
            raise Invalid("invalid_expiry", f"{field} must be between {MIN_EXPIRY} and {MAX_EXPIRY} seconds.")
    if data.default_expiry_seconds > data.max_expiry_seconds:
        raise Invalid("invalid_expiry", "default_expiry_seconds cannot exceed max_expiry_seconds.")
    if data.reprice_endpoint_id is not None and data.reprice_endpoint_id == data.perform_endpoint_id:
        # A re-price call must never reach the handler that performs.
        raise Invalid("invalid_reprice_endpoint", "The re-price endpoint must not be the perform endpoint.",
                      fields={"reprice_endpoint_id": "use a separate endpoint"})


async def _endpoint_exists(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str) -> bool:
    found = await conn.fetchval("SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2",
                                tenant_id, endpoint_id)
    return found is not None


async def put_kind(conn: asyncpg.Connection, actor: Actor, name: str, data: KindInput, *, now: datetime) -> Kind:
    """Create or replace the kind ``name`` (audited).

    Raises:
        Invalid: a bad name, scope or expiry, or an endpoint the tenant does not have.
    """
    _validate(name, data)
    for endpoint_id in (data.perform_endpoint_id, data.reprice_endpoint_id):
        if endpoint_id is not None and (len(endpoint_id) > 100
                                        or not await _endpoint_exists(conn, actor.tenant_id, endpoint_id)):
            raise Invalid("unknown_endpoint", "No such webhook endpoint in this tenant.",
                          fields={"perform_endpoint_id": "not one of your webhook endpoints"})
    try:
        async with conn.transaction():
            row = await _upsert(conn, actor, name, data, now)
    except asyncpg.ForeignKeyViolationError:  # the endpoint was deleted meanwhile
        raise Invalid("unknown_endpoint", "No such webhook endpoint in this tenant.") from None
    return _kind(row)


async def _upsert(conn: asyncpg.Connection, actor: Actor, name: str, data: KindInput, now: datetime) -> asyncpg.Record:
    row = await conn.fetchrow(
        f"INSERT INTO operation_kinds (tenant_id, name, description, scopes, default_expiry_seconds,"  # noqa: S608
        f" max_expiry_seconds, perform_endpoint_id, reprice_endpoint_id, created_at, updated_at)"
        f" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)"
        f" ON CONFLICT (tenant_id, name) DO UPDATE SET description = EXCLUDED.description,"
        f" scopes = EXCLUDED.scopes, default_expiry_seconds = EXCLUDED.default_expiry_seconds,"
        f" max_expiry_seconds = EXCLUDED.max_expiry_seconds, perform_endpoint_id = EXCLUDED.perform_endpoint_id,"
        f" reprice_endpoint_id = EXCLUDED.reprice_endpoint_id, updated_at = EXCLUDED.updated_at"
        f" RETURNING {_COLS}",
        actor.tenant_id, name, data.description, list(dict.fromkeys(data.scopes)), data.default_expiry_seconds,
        data.max_expiry_seconds, data.perform_endpoint_id, data.reprice_endpoint_id, now,
    )
    await audit.record(conn, actor, "operation_kind.put", target_type="operation_kind", target_id=name, at=now,
                       details={"scopes": list(data.scopes), "perform_endpoint_id": data.perform_endpoint_id})
    return row


async def get_kind(conn: asyncpg.Connection, tenant_id: str, name: str) -> Kind | None:
    """The kind ``name`` of the tenant, or ``None``."""
    if not is_kind_name(name):
        return None
    row = await conn.fetchrow(f"SELECT {_COLS} FROM operation_kinds WHERE tenant_id = $1 AND name = $2",  # noqa: S608
                              tenant_id, name)
    return _kind(row) if row else None


async def list_kinds(conn: asyncpg.Connection, tenant_id: str) -> list[Kind]:
    """Every kind of the tenant, by name."""
    rows = await conn.fetch(f"SELECT {_COLS} FROM operation_kinds WHERE tenant_id = $1 ORDER BY name",  # noqa: S608
                            tenant_id)
    return [_kind(r) for r in rows]


async def delete_kind(conn: asyncpg.Connection, actor: Actor, name: str, *, now: datetime) -> None:
    """Delete a kind no operation uses (audited).

    Raises:
        NotFound: no such kind.
        Conflict: operations of this kind exist (they keep their history).
    """
    async with conn.transaction():
        try:
            deleted = await conn.fetchval("DELETE FROM operation_kinds WHERE tenant_id = $1 AND name = $2 RETURNING 1",
                                          actor.tenant_id, name)
        except (asyncpg.ForeignKeyViolationError, asyncpg.RestrictViolationError):
            # operations.kind is ON DELETE RESTRICT: PostgreSQL says restrict_violation (23001).
            raise Conflict("kind_in_use", "Operations of this kind exist; it cannot be deleted.") from None
        if deleted is None:
            raise NotFound("kind_not_found", "No such operation kind.")
        await audit.record(conn, actor, "operation_kind.delete", target_type="operation_kind", target_id=name, at=now)


async def has_kinds(conn: asyncpg.Connection, tenant_id: str) -> bool:
    """Whether the tenant offers operations at all (its ``poppy.json`` then lists the extension)."""
    return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM operation_kinds WHERE tenant_id = $1)", tenant_id))


class ConfirmTargets(msgspec.Struct, frozen=True, kw_only=True):
    """What a confirm needs to know of its kind, read in one statement (`confirm_targets`).

    Attributes:
        perform_enabled: The perform endpoint takes deliveries now.
        reprice_endpoint_id: The re-price endpoint, None when the kind has none.
    """

    perform_enabled: bool
    reprice_endpoint_id: str | None


async def confirm_targets(conn: asyncpg.Connection, tenant_id: str, kind_name: str) -> ConfirmTargets:
    """`perform_endpoint_enabled` and the kind's re-price endpoint in one round trip."""
    row = await conn.fetchrow(
        "SELECT e.enabled, k.reprice_endpoint_id FROM operation_kinds k JOIN webhook_endpoints e"
        " ON e.tenant_id = k.tenant_id AND e.id = k.perform_endpoint_id WHERE k.tenant_id = $1 AND k.name = $2",
        tenant_id, kind_name)
    if row is None:
        return ConfirmTargets(perform_enabled=False, reprice_endpoint_id=None)
    return ConfirmTargets(perform_enabled=bool(row["enabled"]), reprice_endpoint_id=row["reprice_endpoint_id"])


async def perform_endpoint_enabled(conn: asyncpg.Connection, tenant_id: str, kind_name: str) -> bool:
    """Whether the kind's perform endpoint takes deliveries now (a disabled one would strand a confirm)."""
    enabled = await conn.fetchval(
        "SELECT e.enabled FROM operation_kinds k JOIN webhook_endpoints e"
        " ON e.tenant_id = k.tenant_id AND e.id = k.perform_endpoint_id WHERE k.tenant_id = $1 AND k.name = $2",
        tenant_id, kind_name)
    return bool(enabled)
