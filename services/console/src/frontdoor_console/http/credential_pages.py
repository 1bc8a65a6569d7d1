"""Resource-server credentials (what the company's APIs use to call introspection: the
secret is shown once, revocation asks first) and the feedback agents sent."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Invalid, NotFound
from frontdoor_sessions import CredentialView, create_credential, list_credentials, revoke_credential
from frontdoor_sessions.feedback import list_feedback
from litestar import Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from .deps import ctx_of
from .page import FORM, Console, confirm_page

__all__ = ["routes"]

_PAGE = 50


class CredentialForm(msgspec.Struct, frozen=True, kw_only=True):
    name: str = ""


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


async def _page(console: Console, state: State, *, status_code: int = 200, **context: Any) -> Template:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        creds = await list_credentials(conn, console.tenant.id)
    return console.page("credentials.html", nav="credentials", credentials=creds, status_code=status_code,
                        introspection=f"{ctx.issuer_url(console.tenant.slug)}/oauth/introspect",
                        **{"created": None, "error": None, "notice": None, **context})


@get("/resource-credentials")
async def credentials_page(console: Console, state: State,
                           notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    return await _page(console, state, notice="Credential revoked." if notice == "revoked" else None)


@post("/resource-credentials")
async def credentials_create(data: Annotated[CredentialForm, FORM], console: Console, state: State) -> Template:
    console.require("write")
    try:
        async with transaction(ctx_of(state).pool) as conn:
            created = await create_credential(conn, console.actor, data.name)
    except Invalid as exc:
        return await _page(console, state, error=exc.detail, status_code=422)
    # The only response that ever carries the secret.
    return await _page(console, state, created=created, status_code=201)


async def _credential(console: Console, state: State, cred_id: str) -> CredentialView:
    async with ctx_of(state).pool.acquire() as conn:
        for c in await list_credentials(conn, console.tenant.id):
            if c.id == cred_id:
                return c
    raise NotFound("credential_not_found", "No such credential.")


def _confirm(console: Console, c: CredentialView) -> Template:
    return confirm_page(console, nav="credentials", title="Revoke this credential?",
                        message="Your servers using it can no longer call introspection (within ten seconds), so "
                                "they stop accepting agents' tokens. This cannot be undone.",
                        subject=f"{c.name} (fdrs_{c.prefix}…)", action=f"/resource-credentials/{c.id}/revoke",
                        button="Revoke credential", cancel="/resource-credentials")


@get("/resource-credentials/{cred_id:str}/revoke")
async def credentials_revoke_confirm(cred_id: FromPath[str], console: Console, state: State) -> Template:
    return _confirm(console, await _credential(console, state, cred_id))


@post("/resource-credentials/{cred_id:str}/revoke")
async def credentials_revoke(cred_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                             state: State) -> Response[Any]:
    console.require("write")
    c = await _credential(console, state, cred_id)
    if data.confirm != "yes":
        return _confirm(console, c)
    async with transaction(ctx_of(state).pool) as conn:
        await revoke_credential(conn, console.actor, c.id)
    return Redirect("/resource-credentials?notice=revoked", status_code=303)


@get("/feedback")
async def feedback_page(console: Console, state: State,
                        before: str | None = Parameter(default=None, max_length=40)) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        rows = await list_feedback(conn, console.tenant.id, limit=_PAGE, before=before or None)
    return console.page("feedback.html", nav="feedback", reports=rows,
                        next_before=rows[-1].id if len(rows) == _PAGE else None)


routes: list[Any] = [credentials_page, credentials_create, credentials_revoke_confirm, credentials_revoke,
                     feedback_page]
