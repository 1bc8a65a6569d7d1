"""The Team page: members and their roles, invitations, removals (owners only).

An invitation's link carries its token and is shown once, on the response that created
it. Removing a member and withdrawing an invitation ask for confirmation first. The
`frontdoor_tenancy.team` use cases check the role again and write the audit rows.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Conflict, Invalid, NotFound
from frontdoor_tenancy import team
from litestar import Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from ..access import opt
from .deps import ctx_of
from .page import FORM, Console, confirm_page

__all__ = ["routes"]

_NOTICES = {
    "role_changed": "Role changed.",
    "member_removed": "Member removed; their browser sessions have ended.",
    "invite_revoked": "Invitation withdrawn; its link no longer works.",
}


class InviteForm(msgspec.Struct, frozen=True, kw_only=True):
    email: str = ""
    role: str = "viewer"


class RoleForm(msgspec.Struct, frozen=True, kw_only=True):
    role: str = ""


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


async def _team_page(console: Console, state: State, *, status_code: int = 200, **context: Any) -> Template:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        members = await team.list_members(conn, console.tenant.id)
        invites = await team.list_invites(conn, console.tenant.id, now=ctx.now())
    owners = sum(1 for m in members if m.role == "owner")
    return console.page("team.html", nav="team", members=members, invites=invites, owners=owners,
                        status_code=status_code, **{"created": None, "error": None, "notice": None, "value": "",
                                                    **context})


@get("/team")
async def team_page(console: Console, state: State,
                    notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _team_page(console, state, notice=_NOTICES.get(notice or ""))


@post("/team/invites", opt=opt("manage_members"))
async def team_invite(data: Annotated[InviteForm, FORM], console: Console, state: State) -> Template:
    console.require("manage_members")
    ctx = ctx_of(state)
    try:
        async with transaction(ctx.pool) as conn:
            created = await team.invite_member(conn, console.actor, data.email, data.role, now=ctx.now())
    except (Invalid, Conflict) as exc:
        return await _team_page(console, state, error=exc.detail, value=data.email[:254], status_code=422)
    link = f"{ctx.settings.console_base_url}/invite/{created.token}"
    # The only response that ever shows the link: never cached, never rendered again.
    return await _team_page(console, state, created=created.invite, link=link, status_code=201)


async def _member(console: Console, state: State, member_id: str) -> team.Member:
    async with ctx_of(state).pool.acquire() as conn:
        for m in await team.list_members(conn, console.tenant.id):
            if m.id == member_id:
                return m
    raise NotFound("member_not_found", "No such member.")


@post("/team/members/{member_id:str}/role", opt=opt("manage_members"))
async def team_change_role(member_id: FromPath[str], data: Annotated[RoleForm, FORM], console: Console,
                           state: State) -> Response[Any]:
    console.require("manage_members")
    ctx = ctx_of(state)
    try:
        async with transaction(ctx.pool) as conn:
            await team.change_role(conn, console.actor, member_id, data.role, now=ctx.now())
    except (Invalid, Conflict) as exc:
        return await _team_page(console, state, error=exc.detail, status_code=409 if isinstance(exc, Conflict) else 422)
    return Redirect("/team?notice=role_changed", status_code=303)


def _remove_confirm(console: Console, m: team.Member) -> Template:
    return confirm_page(console, nav="team", title="Remove this member?",
                        message="They can no longer sign in, and their browser sessions end at once. Invite them "
                                "again to bring them back.",
                        subject=f"{m.email} ({m.role})", action=f"/team/members/{m.id}/remove",
                        button="Remove member", cancel="/team")


@get("/team/members/{member_id:str}/remove")
async def team_remove_confirm(member_id: FromPath[str], console: Console, state: State) -> Template:
    return _remove_confirm(console, await _member(console, state, member_id))


@post("/team/members/{member_id:str}/remove", opt=opt("manage_members"))
async def team_remove(member_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                      state: State) -> Response[Any]:
    console.require("manage_members")
    m = await _member(console, state, member_id)
    if data.confirm != "yes":
        return _remove_confirm(console, m)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        await team.remove_member(conn, console.actor, m.id, now=ctx.now())
    if m.id == console.actor.id:
        return Redirect("/login", status_code=303)
    return Redirect("/team?notice=member_removed", status_code=303)


async def _invite(console: Console, state: State, invite_id: str) -> team.Invite:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        for i in await team.list_invites(conn, console.tenant.id, now=ctx.now()):
            if i.id == invite_id:
                return i
    raise NotFound("invite_not_found", "No such invitation.")


def _revoke_confirm(console: Console, i: team.Invite) -> Template:
    return confirm_page(console, nav="team", title="Withdraw this invitation?",
                        message="Its link stops working at once.", subject=f"{i.email} ({i.role})",
                        action=f"/team/invites/{i.id}/revoke", button="Withdraw invitation", cancel="/team")


@get("/team/invites/{invite_id:str}/revoke")
async def team_invite_revoke_confirm(invite_id: FromPath[str], console: Console, state: State) -> Template:
    return _revoke_confirm(console, await _invite(console, state, invite_id))


@post("/team/invites/{invite_id:str}/revoke", opt=opt("manage_members"))
async def team_invite_revoke(invite_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                             state: State) -> Response[Any]:
    console.require("manage_members")
    i = await _invite(console, state, invite_id)
    if data.confirm != "yes":
        return _revoke_confirm(console, i)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        await team.revoke_invite(conn, console.actor, i.id, now=ctx.now())
    return Redirect("/team?notice=invite_revoked", status_code=303)


routes: list[Any] = [team_page, team_invite, team_change_role, team_remove_confirm, team_remove,
                     team_invite_revoke_confirm, team_invite_revoke]
