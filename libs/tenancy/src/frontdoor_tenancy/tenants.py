"""Tenants: sign-up (tenant + owner + issuer + first key + API key), lookup, slug changes."""

from __future__ import annotations

import asyncio
from datetime import datetime

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id

from . import audit, issuer_settings, signing_keys
from .actor import Actor
from .api_keys import CreatedApiKey, create_key
from .credentials.key_encryption import Kek
from .credentials.password import check_password_strength, hash_password
from .credentials.slug import InvalidSlug, validate_slug
from .email_address import normalize_email

__all__ = ["SignUp", "SignUpResult", "Tenant", "change_slug", "get_tenant", "sign_up", "tenant_by_slug"]


class SignUp(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/v1/signup`` body."""

    email: str
    password: str
    organization_name: str
    slug: str


class Tenant(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant; ``issuer`` is derived from the configured base URL and the slug."""

    id: str
    slug: str
    organization_name: str
    created_at: datetime


class SignUpResult(msgspec.Struct, frozen=True, kw_only=True):
    """What sign-up returns: the tenant, its owner's ID, and the one-time API key."""

    tenant: Tenant
    admin_id: str
    api_key: CreatedApiKey


def _row(row: asyncpg.Record) -> Tenant:
    return Tenant(id=row["id"], slug=row["slug"], organization_name=row["organization_name"], created_at=row["created_at"])


def _check(cmd: SignUp) -> tuple[str, str, str]:
    errors: dict[str, str] = {}
    try:
        email = normalize_email(cmd.email)
    except ValueError as exc:
        errors["email"] = str(exc)
        email = ""
    try:
        slug = validate_slug(cmd.slug)
    except InvalidSlug as exc:
        errors["slug"] = exc.message
        slug = ""
    org = cmd.organization_name.strip()
    if not 1 <= len(org) <= 120:
        errors["organization_name"] = "must be 1 to 120 characters"
    weak = check_password_strength(cmd.password, email=email or cmd.email, org_name=org)
    if weak:
        errors["password"] = "too weak: " + ", ".join(weak)
    if errors:
        raise Invalid("invalid_signup", "Some fields are not valid.", fields=errors)
    return email, slug, org


async def sign_up(pool: asyncpg.Pool, cmd: SignUp, *, kek: Kek, now: datetime, session_lifetime_s: int = 3600,
                  request_id: str | None = None) -> SignUpResult:
    """Create the tenant, its owner, default issuer settings, its first ES256 key and an API key.

    All in one transaction: a failure leaves nothing behind.

    Raises:
        Invalid: a field is not acceptable (listed per field).
        Conflict: ``slug_taken`` or ``email_taken``.
    """
    email, slug, org = _check(cmd)
    password_hash = await asyncio.to_thread(hash_password, cmd.password)
    tenant_id = new_id("ten")
    admin_id = new_id("adm")
    async with pool.acquire() as conn, conn.transaction():
        try:
            row = await conn.fetchrow(
                "INSERT INTO tenants (id, slug, organization_name, created_at) VALUES ($1, $2, $3, $4) RETURNING *",
                tenant_id, slug, org, now,
            )
        except asyncpg.UniqueViolationError:
            raise Conflict("slug_taken", "That slug is taken; choose another.", fields={"slug": "taken"}) from None
        try:
            await conn.execute(
                "INSERT INTO admins (tenant_id, id, email, password_hash, role) VALUES ($1, $2, $3, $4, 'owner')",
                tenant_id, admin_id, email, password_hash,
            )
        except asyncpg.UniqueViolationError:
            raise Conflict("email_taken", "An account with that email exists; sign in instead.",
                           fields={"email": "already registered"}) from None
        await issuer_settings.insert_settings(
            conn, tenant_id, issuer_settings.default_settings(org, session_lifetime_s=session_lifetime_s)
        )
        kid = await signing_keys.create_first_key(conn, tenant_id, kek, now)
        owner = Actor(tenant_id=tenant_id, type="admin", id=admin_id, role="owner", request_id=request_id)
        await audit.record(conn, owner, "tenant.created", target_type="tenant", target_id=tenant_id,
                           details={"slug": slug})
        await audit.record(conn, owner, "signing_key.created", target_type="signing_key", target_id=kid)
        # The bootstrap key of a headless company: it acts for the owner who signed up.
        key = await create_key(conn, owner, "Created at sign-up", role="owner")
    return SignUpResult(tenant=_row(row), admin_id=admin_id, api_key=key)


async def get_tenant(conn: asyncpg.Connection, tenant_id: str) -> Tenant:
    """The tenant by ID."""
    row = await conn.fetchrow("SELECT * FROM tenants WHERE id = $1", tenant_id)
    if row is None:
        raise NotFound("tenant_not_found", "No such tenant.")
    return _row(row)


async def tenant_by_slug(conn: asyncpg.Connection, slug: str) -> Tenant | None:
    """The tenant whose issuer path is ``slug``, or None."""
    row = await conn.fetchrow("SELECT * FROM tenants WHERE slug = $1", slug)
    return None if row is None else _row(row)


async def change_slug(conn: asyncpg.Connection, actor: Actor, new_slug: str) -> Tenant:
    """Change the issuer path. Refused once any domain is verified or suspended.

    The slug is part of the issuer identifier; changing it after agents have seen it in a
    published ``poppy.json`` would sign every user out and break discovery.
    """
    try:
        slug = validate_slug(new_slug)
    except InvalidSlug as exc:
        raise Invalid("invalid_slug", exc.message, fields={"slug": exc.message}) from None
    await conn.execute("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE", actor.tenant_id)
    locked = await conn.fetchval(
        "SELECT count(*) FROM domains WHERE tenant_id = $1 AND status IN ('verified', 'suspended')", actor.tenant_id
    )
    if locked:
        raise Conflict("slug_locked", "The slug cannot change once a domain is verified: it is part of your issuer URL.")
    try:
        row = await conn.fetchrow("UPDATE tenants SET slug = $2 WHERE id = $1 RETURNING *", actor.tenant_id, slug)
    except asyncpg.UniqueViolationError:
        raise Conflict("slug_taken", "That slug is taken; choose another.", fields={"slug": "taken"}) from None
    await audit.record(conn, actor, "tenant.slug_changed", target_type="tenant", target_id=actor.tenant_id,
                       details={"slug": slug})
    return _row(row)
