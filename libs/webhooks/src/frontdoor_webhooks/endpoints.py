"""Webhook endpoints: where a tenant's messages go, what they subscribe to, their secrets.

Use cases take the caller's connection (they never commit) and an `Actor` whose tenant
scopes every query; changes are audited. Another tenant's endpoint is `NotFound`, like
a missing one. A disabled endpoint keeps its messages: they wait and go out once it is
enabled again. Every endpoint signs with HMAC (``v1``, its ``whsec_`` secret); one whose
``signing_scheme`` is ``v1a`` also signs with Ed25519 and publishes its public key.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import Kek

from .endpoint_secrets import (
    add_secret,
    add_signing_key,
    drop_signing_keys,
    rotate_secret_rows,
    rotate_signing_key_rows,
)
from .endpoint_url import validate_endpoint_url
from .event_types import validate_event_types
from .messages import NOTIFY_CHANNEL
from .parking import in_transaction, lock_endpoint, park, unpark

__all__ = [
    "MAX_SECRET_OVERLAP",
    "CreatedEndpoint",
    "Endpoint",
    "check_overlap",
    "create_endpoint",
    "delete_endpoint",
    "disable_endpoint",
    "enable_endpoint",
    "get_endpoint",
    "list_endpoints",
    "remove_signing_key",
    "rotate_secret",
    "rotate_signing_key",
    "update_endpoint",
]

_MAX_DESCRIPTION = 500
_MAX_RATE = 10_000
_COLUMNS = ("id, tenant_id, url, description, event_types, enabled, disabled_at, disabled_reason, failing_since,"
            " rate_limit_per_second, signing_scheme, (SELECT s.public_key FROM webhook_secrets AS s"
            " WHERE s.tenant_id = webhook_endpoints.tenant_id AND s.endpoint_id = webhook_endpoints.id"
            " AND s.algorithm = 'ed25519' AND s.expires_at IS NULL) AS public_key, created_at, updated_at")
SigningScheme = Literal["v1", "v1a"]


class Endpoint(msgspec.Struct, frozen=True, kw_only=True):
    """One endpoint as the management API shows it (never its secret).

    Attributes:
        disabled_reason: ``manual`` (an admin), ``gone`` (the receiver answered 410) or
            ``failing`` (every attempt failed for ``webhook_disable_after``).
        failing_since: When the current run of failed attempts began; None when the
            last attempt succeeded.
        rate_limit_per_second: Most deliveries per second the company wants; None for
            no limit (the deliverers and the ledger enforce it, counted in PostgreSQL).
        signing_scheme: ``v1`` (HMAC-SHA256 with the ``whsec_`` secret) or ``v1a``
            (the same, plus an Ed25519 signature receivers verify with ``public_key``).
        public_key: The current Ed25519 public key (``whpk_...``) of a ``v1a`` endpoint.
    """

    id: str
    tenant_id: str
    url: str
    description: str
    event_types: list[str]
    enabled: bool
    disabled_at: datetime | None
    disabled_reason: str | None
    failing_since: datetime | None
    rate_limit_per_second: int | None
    signing_scheme: str = "v1"
    public_key: str | None = None
    created_at: datetime
    updated_at: datetime


class CreatedEndpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A new endpoint and its signing secret, which is shown this once."""

    endpoint: Endpoint
    secret: str


def _endpoint(row: asyncpg.Record) -> Endpoint:
    return Endpoint(**{**dict(row), "event_types": list(row["event_types"])})


def _description(text: str) -> str:
    text = text.strip()
    if len(text) > _MAX_DESCRIPTION:
        raise Invalid("invalid_description", f"The description is at most {_MAX_DESCRIPTION} characters.",
                      fields={"description": f"at most {_MAX_DESCRIPTION} characters"})
    return text


def _rate(value: int | None) -> int | None:
    if value is not None and not 1 <= value <= _MAX_RATE:
        raise Invalid("invalid_rate_limit", f"The rate limit is 1 to {_MAX_RATE} per second.",
                      fields={"rate_limit_per_second": f"1 to {_MAX_RATE}"})
    return value


async def create_endpoint(
    conn: asyncpg.Connection,
    actor: Actor,
    *,
    url: str,
    kek: Kek,
    now: datetime,
    description: str = "",
    event_types: Sequence[str] = (),
    rate_limit_per_second: int | None = None,
    signing_scheme: SigningScheme = "v1",
    allow_insecure: bool = False,
    allowlist: Sequence[str] = (),
    max_endpoints: int | None = None,
) -> CreatedEndpoint:
    """Register an endpoint with a fresh secret.

    Args:
        actor: Who acts; the endpoint belongs to ``actor.tenant_id``.
        url: HTTPS URL (see `validate_endpoint_url`).
        kek: Encrypts the secret at rest.
        now: The creation time.
        description: Free text for the dashboard.
        event_types: Subscribed types from `EVENT_TYPES`; empty receives only
            the perform webhook.
        rate_limit_per_second: Optional delivery rate cap.
        signing_scheme: ``v1a`` also makes an Ed25519 key pair (``public_key``).
        allow_insecure: Development: accept ``http://`` loopback URLs.
        allowlist: ``FRONTDOOR_WEBHOOK_ALLOWLIST`` (see `validate_endpoint_url`).
        max_endpoints: ``FRONTDOOR_WEBHOOK_ENDPOINT_LIMIT``: the tenant's cap (None: no cap).

    Returns:
        The endpoint and its ``whsec_`` secret (not retrievable later).

    Raises:
        Invalid: A field is not acceptable.
        Conflict: ``webhook_endpoint_limit`` when the tenant already has ``max_endpoints``.
    """
    checked_url = validate_endpoint_url(url, allow_insecure=allow_insecure, allowlist=allowlist)
    types = validate_event_types(event_types)
    endpoint_id = new_id("whe")
    if signing_scheme not in ("v1", "v1a"):
        raise Invalid("invalid_signing_scheme", "The signing scheme is v1 or v1a.",
                      fields={"signing_scheme": "v1 or v1a"})
    if max_endpoints is not None:
        # Serialise this tenant's creations (a transaction-scoped lock) so two concurrent
        # ones cannot both pass the count.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || $1, 0))",
                           actor.tenant_id)
        count = await conn.fetchval("SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1", actor.tenant_id)
        if count >= max_endpoints:
            raise Conflict("webhook_endpoint_limit", f"A tenant has at most {max_endpoints} webhook endpoints;"
                           " delete one first.")
    await conn.execute(
        "INSERT INTO webhook_endpoints (tenant_id, id, url, description, event_types, rate_limit_per_second,"
        " signing_scheme, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        actor.tenant_id, endpoint_id, checked_url, _description(description), types, _rate(rate_limit_per_second),
        signing_scheme, now,
    )
    secret = await add_secret(conn, actor.tenant_id, endpoint_id, kek, now)
    if signing_scheme == "v1a":
        await add_signing_key(conn, actor.tenant_id, endpoint_id, kek, now)
    await audit.record(conn, actor, "webhook_endpoint.created", target_type="webhook_endpoint",
                       target_id=endpoint_id, details={"url": checked_url, "event_types": types,
                                                       "signing_scheme": signing_scheme}, at=now)
    return CreatedEndpoint(endpoint=await get_endpoint(conn, actor.tenant_id, endpoint_id), secret=secret)


async def get_endpoint(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str) -> Endpoint:
    """The endpoint by ID.

    Raises:
        NotFound: ``webhook_endpoint_not_found`` (also for another tenant's endpoint).
    """
    row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2",  # noqa: S608
                              tenant_id, endpoint_id)
    if row is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    return _endpoint(row)


async def list_endpoints(conn: asyncpg.Connection, tenant_id: str, *, after: str | None = None,
                         limit: int | None = None) -> list[Endpoint]:
    """The tenant's endpoints, oldest first; keyset-paged by ID (``after``)."""
    rows = await conn.fetch(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1"  # noqa: S608
                            " AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3", tenant_id, after, limit)
    return [_endpoint(r) for r in rows]


async def update_endpoint(
    conn: asyncpg.Connection,
    actor: Actor,
    endpoint_id: str,
    *,
    now: datetime,
    url: str | msgspec.UnsetType = msgspec.UNSET,
    description: str | msgspec.UnsetType = msgspec.UNSET,
    event_types: Sequence[str] | msgspec.UnsetType = msgspec.UNSET,
    enabled: bool | msgspec.UnsetType = msgspec.UNSET,
    rate_limit_per_second: int | msgspec.UnsetType | None = msgspec.UNSET,
    allow_insecure: bool = False,
    allowlist: Sequence[str] = (),
) -> Endpoint:
    """Change what is given, leave the rest (``UNSET``) alone.

    ``enabled=True`` is `enable_endpoint`, ``enabled=False`` a manual `disable_endpoint`.

    Raises:
        Invalid: A field is not acceptable.
        NotFound: No such endpoint for this tenant.
    """
    changes: dict[str, Any] = {}
    if not isinstance(url, msgspec.UnsetType):
        changes["url"] = validate_endpoint_url(url, allow_insecure=allow_insecure, allowlist=allowlist)
    if not isinstance(description, msgspec.UnsetType):
        changes["description"] = _description(description)
    if not isinstance(event_types, msgspec.UnsetType):
        changes["event_types"] = validate_event_types(event_types)
    if not isinstance(rate_limit_per_second, msgspec.UnsetType):
        changes["rate_limit_per_second"] = _rate(rate_limit_per_second)
    row = await conn.fetchrow(
        "UPDATE webhook_endpoints SET"
        " url = CASE WHEN $3 THEN $4 ELSE url END,"
        " description = CASE WHEN $5 THEN $6 ELSE description END,"
        " event_types = CASE WHEN $7 THEN $8::text[] ELSE event_types END,"
        " rate_limit_per_second = CASE WHEN $9 THEN $10::integer ELSE rate_limit_per_second END,"
        " updated_at = $11"
        " WHERE tenant_id = $1 AND id = $2 RETURNING " + _COLUMNS,
        actor.tenant_id, endpoint_id,
        "url" in changes, changes.get("url"),
        "description" in changes, changes.get("description"),
        "event_types" in changes, changes.get("event_types"),
        "rate_limit_per_second" in changes, changes.get("rate_limit_per_second"),
        now,
    )
    if row is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    if changes:
        await audit.record(conn, actor, "webhook_endpoint.updated", target_type="webhook_endpoint",
                           target_id=endpoint_id, details={"fields": sorted(changes)}, at=now)
    if enabled is True:
        return await enable_endpoint(conn, actor, endpoint_id, now=now)
    if enabled is False:
        return await disable_endpoint(conn, actor, endpoint_id, reason="manual", now=now)
    return _endpoint(row)


async def delete_endpoint(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, now: datetime) -> None:
    """Delete an endpoint with its secrets, messages and attempts.

    Raises:
        Conflict: ``webhook_endpoint_in_use``: another table (operation kinds) refers to it.
        NotFound: No such endpoint for this tenant.
    """
    try:
        deleted = await conn.fetchval(
            "DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 RETURNING id", actor.tenant_id, endpoint_id)
    except (asyncpg.ForeignKeyViolationError, asyncpg.RestrictViolationError):
        raise Conflict("webhook_endpoint_in_use",
                       "Operations still use this endpoint; disable it, or point them elsewhere first.") from None
    if deleted is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    await audit.record(conn, actor, "webhook_endpoint.deleted", target_type="webhook_endpoint",
                       target_id=endpoint_id, at=now)


MAX_SECRET_OVERLAP = timedelta(days=7)


def check_overlap(overlap: timedelta | int) -> timedelta:
    """The overlap of a secret or key rotation, 0 to `MAX_SECRET_OVERLAP` (seconds or a timedelta).

    Checked on the number before any timedelta is built from it: a caller's
    ``overlap_seconds`` of 10**20 would otherwise overflow instead of being refused.

    Raises:
        Invalid: ``invalid_overlap``.
    """
    seconds = overlap.total_seconds() if isinstance(overlap, timedelta) else overlap
    if not 0 <= seconds <= MAX_SECRET_OVERLAP.total_seconds():
        raise Invalid("invalid_overlap", "The overlap is 0 to 7 days (0 to 604800 seconds).",
                      fields={"overlap_seconds": "0 to 604800"})
    return overlap if isinstance(overlap, timedelta) else timedelta(seconds=overlap)


async def rotate_secret(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, kek: Kek, now: datetime,
                        overlap: timedelta) -> str:
    """Give the endpoint a new secret; the current one keeps signing for ``overlap``.

    Returns:
        The new ``whsec_`` secret, shown this once.

    Raises:
        Invalid: ``overlap`` is negative or longer than 7 days.
        NotFound: No such endpoint for this tenant.
    """
    check_overlap(overlap)
    found = await conn.fetchval(
        "SELECT id FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 FOR UPDATE", actor.tenant_id, endpoint_id)
    if found is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    secret = await rotate_secret_rows(conn, actor.tenant_id, endpoint_id, kek, now=now, overlap=overlap)
    await audit.record(conn, actor, "webhook_endpoint.secret_rotated", target_type="webhook_endpoint",
                       target_id=endpoint_id, details={"overlap_s": int(overlap.total_seconds())}, at=now)
    return secret


async def enable_endpoint(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, now: datetime) -> Endpoint:
    """Enable an endpoint (again); its waiting messages become due at once.

    In the same transaction its messages are unparked (back in the due index), any
    waiting for a later retry are made due at ``now``, and the deliverers are woken. The failure
    streak restarts, so a re-enabled endpoint gets the full ``webhook_disable_after``
    before it can be disabled again.

    Raises:
        NotFound: No such endpoint for this tenant.
    """
    async with in_transaction(conn):
        await lock_endpoint(conn, endpoint_id)  # messages being written see this, or are seen (parking)
        row = await conn.fetchrow(
            "UPDATE webhook_endpoints SET enabled = true, disabled_at = NULL, disabled_reason = NULL,"  # noqa: S608
            " failing_since = NULL, updated_at = $3 WHERE tenant_id = $1 AND id = $2 RETURNING " + _COLUMNS,
            actor.tenant_id, endpoint_id, now)
        if row is None:
            raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
        if await unpark(conn, actor.tenant_id, endpoint_id, now):
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, endpoint_id)
    await audit.record(conn, actor, "webhook_endpoint.enabled", target_type="webhook_endpoint",
                       target_id=endpoint_id, at=now)
    return _endpoint(row)


async def disable_endpoint(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, reason: str,
                           now: datetime) -> Endpoint:
    """Stop deliveries to an endpoint; its messages wait, parked (``reason``: manual, gone, failing).

    Idempotent: disabling a disabled endpoint keeps its first time and reason.

    Raises:
        NotFound: No such endpoint for this tenant.
    """
    async with in_transaction(conn):
        await lock_endpoint(conn, endpoint_id)
        row = await conn.fetchrow(
            "UPDATE webhook_endpoints SET enabled = false, disabled_at = coalesce(disabled_at, $3),"  # noqa: S608
            " disabled_reason = coalesce(disabled_reason, $4), updated_at = $3"
            " WHERE tenant_id = $1 AND id = $2 RETURNING " + _COLUMNS,
            actor.tenant_id, endpoint_id, now, reason)
        if row is None:
            raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
        await park(conn, actor.tenant_id, endpoint_id)
    await audit.record(conn, actor, "webhook_endpoint.disabled", target_type="webhook_endpoint",
                       target_id=endpoint_id, details={"reason": reason}, at=now)
    return _endpoint(row)


async def rotate_signing_key(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, kek: Kek, now: datetime,
                             overlap: timedelta) -> Endpoint:
    """Switch the endpoint to ``v1a`` with a new Ed25519 key, or give a ``v1a`` endpoint a new one.

    The previous key, if any, keeps signing beside the new one for ``overlap``, so a
    receiver that pinned it keeps verifying while it fetches the new public key.

    Raises:
        Invalid: ``overlap`` is negative or longer than 7 days.
        NotFound: No such endpoint for this tenant.
    """
    check_overlap(overlap)
    found = await conn.fetchval(
        "SELECT signing_scheme FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
        actor.tenant_id, endpoint_id)
    if found is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    public_key = await rotate_signing_key_rows(conn, actor.tenant_id, endpoint_id, kek, now=now, overlap=overlap)
    await conn.execute("UPDATE webhook_endpoints SET signing_scheme = 'v1a', updated_at = $3"
                       " WHERE tenant_id = $1 AND id = $2", actor.tenant_id, endpoint_id, now)
    await audit.record(conn, actor, "webhook_endpoint.signing_key_rotated", target_type="webhook_endpoint",
                       target_id=endpoint_id, at=now,
                       details={"public_key": public_key, "previous_scheme": found,
                                "overlap_s": int(overlap.total_seconds())})
    return await get_endpoint(conn, actor.tenant_id, endpoint_id)


async def remove_signing_key(conn: asyncpg.Connection, actor: Actor, endpoint_id: str, *, now: datetime) -> Endpoint:
    """Go back to ``v1`` (HMAC only): every Ed25519 key of the endpoint is deleted at once.

    Raises:
        NotFound: No such endpoint for this tenant.
    """
    found = await conn.fetchval(
        "UPDATE webhook_endpoints SET signing_scheme = 'v1', updated_at = $3 WHERE tenant_id = $1 AND id = $2"
        " RETURNING id", actor.tenant_id, endpoint_id, now)
    if found is None:
        raise NotFound("webhook_endpoint_not_found", "No such webhook endpoint.")
    await drop_signing_keys(conn, actor.tenant_id, endpoint_id)
    await audit.record(conn, actor, "webhook_endpoint.signing_key_removed", target_type="webhook_endpoint",
                       target_id=endpoint_id, at=now)
    return await get_endpoint(conn, actor.tenant_id, endpoint_id)
