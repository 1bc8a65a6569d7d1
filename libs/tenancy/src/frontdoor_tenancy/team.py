"""A tenant's team: members with roles, invitations by email, removals.

Only owners manage the team (`roles.require(actor, "manage_members")`). A tenant always
keeps at least one owner: demoting or removing the last one is refused, and the check
locks the tenant's owner rows so two concurrent demotions cannot both pass. An
invitation is a random token shown once (as a link), stored as its SHA-256, that expires;
accepting it creates the member with the invited role and the password they choose.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from datetime import datetime, timedelta

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_core.ids import new_id

from . import audit
from .actor import Actor
from .admins import Admin
from .credentials.password import check_password_strength, hash_password
from .email_address import normalize_email
from .roles import ROLES, require

__all__ = [
    "INVITE_LIFETIME",
    "CreatedInvite",
    "Invite",
    "Member",
    "accept_invite",
    "change_role",
    "find_invite",
    "invite_member",
    "list_invites",
    "list_members",
    "remove_member",
    "revoke_invite",
]

INVITE_LIFETIME = timedelta(days=7)


class Member(msgspec.Struct, frozen=True, kw_only=True):
    """An admin of the tenant as the team page lists them."""

    id: str
    email: str
    role: str
    created_at: datetime


class Invite(msgspec.Struct, frozen=True, kw_only=True):
    """An invitation (never its token)."""

    id: str
    email: str
    role: str
    created_at: datetime
    expires_at: datetime
    accepted_at: datetime | None
    revoked_at: datetime | None

    def open_at(self, now: datetime) -> bool:
        return self.accepted_at is None and self.revoked_at is None and self.expires_at > now


class CreatedInvite(msgspec.Struct, frozen=True, kw_only=True):
    """A new invitation: ``token`` is the plaintext, returned exactly once."""

    invite: Invite
    token: str


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _role(role: str) -> str:
    if role not in ROLES:
        raise Invalid("invalid_role", "The role must be owner, admin or viewer.", fields={"role": "owner, admin or viewer"})
    return role


async def list_members(conn: asyncpg.Connection, tenant_id: str) -> list[Member]:
    """Every admin of the tenant, owners first, then by email."""
    rows = await conn.fetch(
        "SELECT id, email, role, created_at FROM admins WHERE tenant_id = $1"
        " ORDER BY array_position(ARRAY['owner','admin','viewer'], role), lower(email)",
        tenant_id,
    )
    return [Member(**dict(r)) for r in rows]


async def list_invites(conn: asyncpg.Connection, tenant_id: str, *, now: datetime) -> list[Invite]:
    """Invitations not yet accepted, revoked or expired, newest first."""
    rows = await conn.fetch(
        "SELECT id, email, role, created_at, expires_at, accepted_at, revoked_at FROM admin_invites WHERE tenant_id = $1 AND accepted_at IS NULL"
        " AND revoked_at IS NULL AND expires_at > $2 ORDER BY id DESC",
        tenant_id, now,
    )
    return [Invite(**dict(r)) for r in rows]


async def invite_member(conn: asyncpg.Connection, actor: Actor, email: str, role: str, *,
                        now: datetime, lifetime: timedelta = INVITE_LIFETIME) -> CreatedInvite:
    """Invite ``email`` with ``role``; an open invitation for the same email is replaced.

    Raises:
        Invalid: ``invalid_email`` or ``invalid_role``.
        Conflict: ``already_member`` when the email is an admin of this tenant (never
            for another tenant's admin: that answer would reveal who uses Frontdoor).
    """
    require(actor, "manage_members")
    try:
        address = normalize_email(email)
    except ValueError as exc:
        raise Invalid("invalid_email", "That is not an email address.", fields={"email": str(exc)}) from None
    _role(role)
    if await conn.fetchval("SELECT 1 FROM admins WHERE tenant_id = $1 AND lower(email) = $2", actor.tenant_id,
                           address):
        # Your own team is no secret to you: say so.
        raise Conflict("already_member", "That email is already a member of your team.",
                       fields={"email": "already a member"})
    # An admin of *another* tenant is invited like anyone else, so the answer tells nothing
    # about which emails Frontdoor knows. An email still signs in to one tenant only: the
    # invitation cannot be accepted (`accept_invite` answers ``email_taken`` to whoever
    # holds the link, the owner of that email).
    await conn.execute(
        "UPDATE admin_invites SET revoked_at = $3 WHERE tenant_id = $1 AND lower(email) = $2"
        " AND accepted_at IS NULL AND revoked_at IS NULL",
        actor.tenant_id, address, now,
    )
    token = secrets.token_urlsafe(32)
    invite_id = new_id("inv")
    row = await conn.fetchrow(
        "INSERT INTO admin_invites (tenant_id, id, email, role, token_hash, invited_by, created_at, expires_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id, email, role, created_at, expires_at, accepted_at, revoked_at",
        actor.tenant_id, invite_id, address, role, _hash(token), actor.id, now, now + lifetime,
    )
    await audit.record(conn, actor, "member.invited", target_type="invite", target_id=invite_id,
                       details={"email": address, "role": role}, at=now)
    return CreatedInvite(invite=Invite(**dict(row)), token=token)


async def revoke_invite(conn: asyncpg.Connection, actor: Actor, invite_id: str, *, now: datetime) -> None:
    """Withdraw an open invitation (another tenant's or an unknown one: 404)."""
    require(actor, "manage_members")
    row = await conn.fetchrow(
        "UPDATE admin_invites SET revoked_at = coalesce(revoked_at, $3) WHERE tenant_id = $1 AND id = $2"
        " AND accepted_at IS NULL RETURNING email",
        actor.tenant_id, invite_id, now,
    )
    if row is None:
        raise NotFound("invite_not_found", "No such invitation.")
    await audit.record(conn, actor, "member.invite_revoked", target_type="invite", target_id=invite_id,
                       details={"email": row["email"]}, at=now)


async def find_invite(conn: asyncpg.Connection, token: str, *, now: datetime) -> tuple[Invite, str] | None:
    """The open invitation for a presented token and its tenant's ID, or None (unknown, used, expired)."""
    row = await conn.fetchrow(
        "SELECT tenant_id, id, email, role, created_at, expires_at, accepted_at, revoked_at FROM admin_invites WHERE token_hash = $1"
        " AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2",
        _hash(token), now,
    )
    if row is None:
        return None
    data = dict(row)
    tenant_id = data.pop("tenant_id")
    return Invite(**data), tenant_id


async def accept_invite(conn: asyncpg.Connection, token: str, password: str, *, now: datetime,
                        request_id: str | None = None) -> Admin:
    """Create the member of an open invitation with the password they chose (one use only).

    Answers the new admin, ready for `admins.start_session`.

    Raises:
        NotFound: the token is unknown, used, withdrawn or expired (one answer).
        Invalid: the password is too weak.
        Conflict: the email became an admin meanwhile.
    """
    row = await conn.fetchrow(
        "SELECT a.tenant_id, a.id, a.email, a.role, t.organization_name FROM admin_invites a"
        " JOIN tenants t ON t.id = a.tenant_id WHERE a.token_hash = $1 AND a.accepted_at IS NULL"
        " AND a.revoked_at IS NULL AND a.expires_at > $2 FOR UPDATE OF a",
        _hash(token), now,
    )
    if row is None:
        raise NotFound("invite_not_found", "This invitation is not valid any more. Ask for a new one.")
    weak = check_password_strength(password, email=row["email"], org_name=row["organization_name"])
    if weak:
        raise Invalid("weak_password", "Choose a stronger password: " + ", ".join(weak).replace("_", " ") + ".",
                      fields={"password": "too weak: " + ", ".join(weak)})
    password_hash = await asyncio.to_thread(hash_password, password)
    admin_id = new_id("adm")
    try:
        await conn.execute(
            "INSERT INTO admins (tenant_id, id, email, password_hash, role, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            row["tenant_id"], admin_id, row["email"], password_hash, row["role"], now,
        )
    except asyncpg.UniqueViolationError:
        raise Conflict("email_taken", "That email already belongs to a Frontdoor admin.") from None
    await conn.execute("UPDATE admin_invites SET accepted_at = $3 WHERE tenant_id = $1 AND id = $2",
                       row["tenant_id"], row["id"], now)
    member = Actor(tenant_id=row["tenant_id"], type="admin", id=admin_id, role=row["role"], request_id=request_id)
    await audit.record(conn, member, "member.joined", target_type="admin", target_id=admin_id,
                       details={"email": row["email"], "role": row["role"], "invite_id": row["id"]}, at=now)
    return Admin(tenant_id=row["tenant_id"], id=admin_id, email=row["email"], role=row["role"])


async def _owners_locked(conn: asyncpg.Connection, tenant_id: str) -> list[str]:
    rows = await conn.fetch("SELECT id FROM admins WHERE tenant_id = $1 AND role = 'owner' ORDER BY id FOR UPDATE",
                            tenant_id)
    return [r["id"] for r in rows]


async def change_role(conn: asyncpg.Connection, actor: Actor, member_id: str, role: str, *, now: datetime) -> Member:
    """Give a member another role; the last owner cannot stop being one."""
    require(actor, "manage_members")
    _role(role)
    owners = await _owners_locked(conn, actor.tenant_id)
    current = await conn.fetchrow("SELECT role FROM admins WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
                                  actor.tenant_id, member_id)
    if current is None:
        raise NotFound("member_not_found", "No such member.")
    if current["role"] == "owner" and role != "owner" and owners == [member_id]:
        raise Conflict("last_owner", "A team needs at least one owner: make someone else owner first.")
    row = await conn.fetchrow(
        "UPDATE admins SET role = $3 WHERE tenant_id = $1 AND id = $2 RETURNING id, email, role, created_at",
        actor.tenant_id, member_id, role,
    )
    if current["role"] != role:
        await audit.record(conn, actor, "member.role_changed", target_type="admin", target_id=member_id,
                           details={"from": current["role"], "to": role}, at=now)
    return Member(**dict(row))


async def remove_member(conn: asyncpg.Connection, actor: Actor, member_id: str, *, now: datetime) -> Member:
    """Remove a member: their browser sessions end at once; never the last owner."""
    require(actor, "manage_members")
    owners = await _owners_locked(conn, actor.tenant_id)
    row = await conn.fetchrow("SELECT id, email, role, created_at FROM admins WHERE tenant_id = $1 AND id = $2"
                              " FOR UPDATE", actor.tenant_id, member_id)
    if row is None:
        raise NotFound("member_not_found", "No such member.")
    if row["role"] == "owner" and owners == [member_id]:
        raise Conflict("last_owner", "A team needs at least one owner: the last owner cannot be removed.")
    await conn.execute("DELETE FROM admins WHERE tenant_id = $1 AND id = $2", actor.tenant_id, member_id)
    await audit.record(conn, actor, "member.removed", target_type="admin", target_id=member_id,
                       details={"email": row["email"], "role": row["role"]}, at=now)
    return Member(**dict(row))
