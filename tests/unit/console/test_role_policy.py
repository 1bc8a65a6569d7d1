"""Every role rule, as the one policy table says (`frontdoor_tenancy.roles`), and how the
console's guard decides what a route needs (`frontdoor_console.access.needs`)."""

from __future__ import annotations

import pytest
from frontdoor_console.access import needs
from frontdoor_core.errors import Forbidden
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.roles import PERMISSIONS, ROLES, can, require, role_at_most

EXPECTED = {
    ("owner", "read"): True, ("owner", "write"): True,
    ("owner", "manage_members"): True, ("owner", "manage_api_keys"): True,
    ("admin", "read"): True, ("admin", "write"): True,
    ("admin", "manage_members"): False, ("admin", "manage_api_keys"): False,
    ("viewer", "read"): True, ("viewer", "write"): False,
    ("viewer", "manage_members"): False, ("viewer", "manage_api_keys"): False,
}


def test_the_table_covers_every_role_and_permission() -> None:
    assert set(EXPECTED) == {(r, p) for r in ROLES for p in PERMISSIONS}


@pytest.mark.parametrize(("role", "permission"), sorted(EXPECTED))
def test_each_role_rule(role: str, permission: str) -> None:
    assert can(role, permission) is EXPECTED[(role, permission)]  # type: ignore[arg-type]
    actor = Actor(tenant_id="ten_x", type="admin", id="adm_x", role=role)  # type: ignore[arg-type]
    if EXPECTED[(role, permission)]:
        require(actor, permission)  # type: ignore[arg-type]
    else:
        with pytest.raises(Forbidden) as refused:
            require(actor, permission)  # type: ignore[arg-type]
        owner_only = permission in ("manage_members", "manage_api_keys")
        assert refused.value.code == ("owner_required" if owner_only else "read_only")


def test_unknown_roles_grant_nothing_and_the_system_is_trusted() -> None:
    for permission in PERMISSIONS:
        assert not can("root", permission)
        assert not can("", permission)
        require(Actor(tenant_id="ten_x", type="system"), permission)


def test_api_keys_act_with_their_role() -> None:
    key = Actor(tenant_id="ten_x", type="api_key", id="key_x", role="viewer")
    assert not key.can_write
    with pytest.raises(Forbidden):
        require(key, "write")
    assert Actor(tenant_id="ten_x", type="api_key", id="key_y").can_write  # default: admin


def test_nobody_grants_more_than_they_hold() -> None:
    assert role_at_most("viewer", "admin") and role_at_most("admin", "admin") and role_at_most("owner", "owner")
    assert not role_at_most("owner", "admin") and not role_at_most("admin", "viewer")
    assert not role_at_most("superuser", "owner") and not role_at_most("viewer", "nobody")


@pytest.mark.parametrize(("method", "opt", "need"), [
    ("GET", {}, "read"), ("HEAD", {}, "read"), ("OPTIONS", {}, "read"),
    ("POST", {}, "write"), ("PUT", {}, "write"), ("PATCH", {}, "write"), ("DELETE", {}, "write"),
    ("post", {}, "write"),
    ("POST", {"permission": "manage_members"}, "manage_members"),
    ("DELETE", {"permission": "manage_api_keys"}, "manage_api_keys"),
    ("POST", {"permission": "public"}, "public"),
    ("POST", {"permission": "read"}, "read"),
])
def test_a_route_that_says_nothing_needs_write_for_any_change(method: str, opt: dict[str, str], need: str) -> None:
    assert needs(method, opt) == need
