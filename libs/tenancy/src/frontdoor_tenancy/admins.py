"""Admin accounts and their browser sessions (the dashboard's sign-in).

Sessions are opaque random tokens; only their SHA-256 is stored. They expire when idle
and are replaced at every sign-in (no session fixation).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from datetime import datetime, timedelta

import asyncpg
import msgspec
from frontdoor_core.errors import Invalid
from frontdoor_core.ids import new_id

from . import audit
from .actor import Actor, Role
from .credentials.password import (
    DUMMY_PASSWORD_HASH,
    check_password_strength,
    hash_password,
    needs_rehash,
    verify_password,
)
from .email_address import normalize_email

__all__ = ["Admin", "AdminSession", "authenticate", "change_password", "end_session", "resume_session",
           "start_session"]

_MAX_LIFETIME = timedelta(days=7)


class Admin(msgspec.Struct, frozen=True, kw_only=True):
    """An admin of one tenant."""

    tenant_id: str
    id: str
    email: str
    role: Role


class AdminSession(msgspec.Struct, frozen=True, kw_only=True):
    """A signed-in browser."""

    admin: Admin
    session_id: str
    csrf_token: str


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


async def authenticate(conn: asyncpg.Connection, email: str, password: str) -> Admin | None:
    """The admin for this email and password, or None.

    Unknown email and wrong password take the same time and give the same answer: an
    unknown email is checked against a dummy argon2id hash. A right password whose
    stored hash was made with older argon2 parameters is rehashed and stored.
    """
    try:
        key = normalize_email(email)
    except ValueError:
        key = ""
    row = await conn.fetchrow(
        "SELECT tenant_id, id, email, role, password_hash FROM admins WHERE lower(email) = $1", key
    ) if key else None
    stored = row["password_hash"] if row else DUMMY_PASSWORD_HASH
    ok = await asyncio.to_thread(verify_password, stored, password)
    if row is None or not ok:
        return None
    if needs_rehash(stored):
        # The argon2 parameters changed since this hash was made: the password is known
        # right now, so store it hashed with the current ones. Compare-and-set on the old
        # hash, so a password changed meanwhile is never overwritten.
        fresh = await asyncio.to_thread(hash_password, password)
        await conn.execute("UPDATE admins SET password_hash = $3 WHERE tenant_id = $1 AND id = $2"
                           " AND password_hash = $4", row["tenant_id"], row["id"], fresh, stored)
    return Admin(tenant_id=row["tenant_id"], id=row["id"], email=row["email"], role=row["role"])


async def start_session(conn: asyncpg.Connection, admin: Admin, *, now: datetime,
                        request_id: str | None = None) -> tuple[str, AdminSession]:
    """Open a session; return the cookie value (shown once) and the session."""
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(24)
    session_id = new_id("asn")
    await conn.execute(
        """
        INSERT INTO admin_sessions (tenant_id, id, admin_id, token_hash, csrf_token, created_at, last_seen_at, expires_at)
        VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
        """,
        admin.tenant_id, session_id, admin.id, _hash(token), csrf, now, now + _MAX_LIFETIME,
    )
    actor = Actor(tenant_id=admin.tenant_id, type="admin", id=admin.id, role=admin.role, request_id=request_id)
    await audit.record(conn, actor, "admin.signed_in", target_type="admin", target_id=admin.id, at=now)
    return token, AdminSession(admin=admin, session_id=session_id, csrf_token=csrf)


async def resume_session(conn: asyncpg.Connection, token: str, *, now: datetime, idle: timedelta) -> AdminSession | None:
    """The session for a cookie value, sliding its idle expiry; None if unknown or expired."""
    row = await conn.fetchrow(
        """
        UPDATE admin_sessions s SET last_seen_at = $2
          FROM admins a
         WHERE s.token_hash = $1 AND s.expires_at > $2 AND s.last_seen_at > $2 - $3::interval
           AND a.tenant_id = s.tenant_id AND a.id = s.admin_id
        RETURNING s.tenant_id, s.id, s.csrf_token, a.id AS admin_id, a.email, a.role
        """,
        _hash(token), now, idle,
    )
    if row is None:
        return None
    admin = Admin(tenant_id=row["tenant_id"], id=row["admin_id"], email=row["email"], role=row["role"])
    return AdminSession(admin=admin, session_id=row["id"], csrf_token=row["csrf_token"])


async def end_session(conn: asyncpg.Connection, token: str) -> None:
    """Sign out: the cookie value stops working at once."""
    await conn.execute("DELETE FROM admin_sessions WHERE token_hash = $1", _hash(token))


async def change_password(conn: asyncpg.Connection, admin: Admin, current: str, new: str, *, now: datetime,
                          request_id: str | None = None) -> None:
    """Replace the signed-in admin's password after checking the current one.

    Every browser session of the admin ends (the caller starts a fresh one, so the
    cookie rotates). Run it inside a transaction.

    Raises:
        Invalid: the current password is wrong (``wrong_password``) or the new one is weak.
    """
    row = await conn.fetchrow(
        "SELECT a.password_hash, t.organization_name FROM admins a JOIN tenants t ON t.id = a.tenant_id"
        " WHERE a.tenant_id = $1 AND a.id = $2 FOR UPDATE OF a",
        admin.tenant_id, admin.id,
    )
    if row is None or not await asyncio.to_thread(verify_password, row["password_hash"], current):
        raise Invalid("wrong_password", "Your current password is not right.",
                      fields={"current_password": "not right"})
    weak = check_password_strength(new, email=admin.email, org_name=row["organization_name"])
    if weak:
        raise Invalid("weak_password", "Choose a stronger password: " + ", ".join(weak).replace("_", " ") + ".",
                      fields={"new_password": "too weak: " + ", ".join(weak)})
    password_hash = await asyncio.to_thread(hash_password, new)
    await conn.execute("UPDATE admins SET password_hash = $3 WHERE tenant_id = $1 AND id = $2",
                       admin.tenant_id, admin.id, password_hash)
    await conn.execute("DELETE FROM admin_sessions WHERE tenant_id = $1 AND admin_id = $2", admin.tenant_id, admin.id)
    actor = Actor(tenant_id=admin.tenant_id, type="admin", id=admin.id, role=admin.role, request_id=request_id)
    await audit.record(conn, actor, "admin.password_changed", target_type="admin", target_id=admin.id, at=now)
