"""What each role may do: the one table every surface (dashboard, management API, use
cases) asks.

An admin membership has a role; so does a management API key (``admin`` unless its
owner chose otherwise). ``owner`` does everything; ``admin`` changes the tenant's
configuration and acts on agents, Sessions and accounts; ``viewer`` reads and changes
nothing. Only owners manage the team (invites, roles, removals) and the credentials that
act as the tenant (API keys).
"""

from __future__ import annotations

from typing import Literal, get_args

from frontdoor_core.errors import Forbidden

from .actor import Actor, Role

__all__ = ["PERMISSIONS", "ROLES", "Permission", "can", "require", "role_at_most"]

Permission = Literal["read", "write", "manage_members", "manage_api_keys"]
"""``read`` every page and list; ``write`` any other change; the last two are owner-only."""

ROLES: tuple[Role, ...] = ("owner", "admin", "viewer")
PERMISSIONS: tuple[Permission, ...] = get_args(Permission)

_GRANTS: dict[Role, frozenset[Permission]] = {
    "owner": frozenset(PERMISSIONS),
    "admin": frozenset({"read", "write"}),
    "viewer": frozenset({"read"}),
}
_RANK: dict[Role, int] = {"viewer": 0, "admin": 1, "owner": 2}


def can(role: str, permission: Permission) -> bool:
    """Whether ``role`` grants ``permission``; an unknown role grants nothing."""
    grants = _GRANTS.get(role)  # type: ignore[call-overload]
    return grants is not None and permission in grants


def require(actor: Actor, permission: Permission) -> None:
    """Raise `Forbidden` unless the actor's role grants ``permission``.

    The system actor (scheduled jobs, the issuer acting for a company) is trusted.
    """
    if actor.type == "system" or can(actor.role, permission):
        return
    if permission in ("manage_members", "manage_api_keys"):
        raise Forbidden("owner_required", "Only an owner can do this.")
    raise Forbidden("read_only", "Your role can view but not change this.")


def role_at_most(role: str, ceiling: str) -> bool:
    """Whether ``role`` is a known role no stronger than ``ceiling`` (nobody grants more than they hold)."""
    return role in _RANK and ceiling in _RANK and _RANK[role] <= _RANK[ceiling]
