"""Dashboard pages for agent traffic: Sessions (live list, detail, revoke) and Accounts
(the agents connected to an account, disconnect one or all).

The Sessions list refreshes itself through htmx polling of ``/sessions/rows`` (the same
filters, rows only). Revoking and disconnecting ask for confirmation first; the use cases
write the audit rows.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Invalid
from frontdoor_identity import check_client_id
from frontdoor_sessions import MAX_ACCOUNT_ID, await_streams, disconnect_account
from frontdoor_sessions.account_directory import connected_accounts
from frontdoor_sessions.connected_agents import connected_agents
from frontdoor_sessions.session_directory import get_session, list_sessions, revoke_session
from litestar import Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, Parameter
from litestar.response import Redirect, Template

from .deps import ctx_of
from .page import FORM, Console, confirm_page

__all__ = ["routes"]

_NOTICES = {
    "session_revoked": "Session revoked: its tokens stop working on the agent's next request.",
    "session_unchanged": "That Session had already ended.",
    "account_disconnected": "Disconnected: the agents' Account Tokens are revoked and their Sessions signed out.",
}
POLL_SECONDS = 5


class ConfirmForm(msgspec.Struct, frozen=True, kw_only=True):
    confirm: str = ""


class DisconnectForm(msgspec.Struct, frozen=True, kw_only=True):
    account: str = ""
    client_id: str = ""
    confirm: str = ""


def _account(raw: str) -> str:
    if not 0 < len(raw) <= MAX_ACCOUNT_ID or raw.strip() != raw or "\x00" in raw:
        raise Invalid("invalid_account", "The account must be your account ID (1 to 255 characters).")
    return raw


def _client_id(raw: str, dev: bool) -> str:
    try:
        return check_client_id(raw, allow_http_loopback=dev)
    except Exception:
        raise Invalid("invalid_client_id", "client_id must be the agent's https metadata URL.") from None


async def _rows(state: State, console: Console, client_id: str | None, account: str | None,
                ended: bool) -> list[Any]:
    async with ctx_of(state).pool.acquire() as conn:
        return await list_sessions(conn, console.tenant.id, client_id=client_id or None, account_id=account or None,
                                   live=not ended)


def _query(client_id: str | None, account: str | None, ended: bool) -> str:
    q = {k: v for k, v in (("client_id", client_id), ("account", account), ("ended", "1" if ended else None)) if v}
    return urlencode(q)


@get("/sessions")
async def sessions_page(console: Console, state: State, *,
                        client_id: str | None = Parameter(default=None, max_length=2048),
                        account: str | None = Parameter(default=None, max_length=MAX_ACCOUNT_ID),
                        ended: bool = Parameter(default=False),
                        notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    rows = await _rows(state, console, client_id, account, ended)
    return console.page("sessions.html", nav="sessions", sessions=rows, client_id=client_id or "",
                        account=account or "", ended=ended, query=_query(client_id, account, ended),
                        poll=POLL_SECONDS, notice=_NOTICES.get(notice or ""))


@get("/sessions/rows")
async def sessions_rows(console: Console, state: State,
                        client_id: str | None = Parameter(default=None, max_length=2048),
                        account: str | None = Parameter(default=None, max_length=MAX_ACCOUNT_ID),
                        ended: bool = Parameter(default=False)) -> Template:
    """The list's rows only: what the page's htmx poll swaps in."""
    rows = await _rows(state, console, client_id, account, ended)
    return Template("_session_rows.html", context={"sessions": rows, "can_write": console.can_write})


@get("/sessions/{session_id:str}")
async def session_detail(session_id: FromPath[str], console: Console, state: State) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        s = await get_session(conn, console.tenant.id, session_id)
    return console.page("session.html", nav="sessions", s=s)


def _revoke_confirm(console: Console, s: Any) -> Template:
    return confirm_page(console, nav="sessions", title="Revoke this Session?",
                        message="It ends now: the agent's Session Token stops working on its next request, and the "
                                "sign-in it came from is revoked too. The agent may start a new, signed-out Session.",
                        subject=f"{s.id} · {s.client_name or s.client_id}", action=f"/sessions/{s.id}/revoke",
                        button="Revoke Session", cancel=f"/sessions/{s.id}")


@get("/sessions/{session_id:str}/revoke")
async def session_revoke_confirm(session_id: FromPath[str], console: Console, state: State) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        s = await get_session(conn, console.tenant.id, session_id)
    return _revoke_confirm(console, s)


@post("/sessions/{session_id:str}/revoke")
async def session_revoke(session_id: FromPath[str], data: Annotated[ConfirmForm, FORM], console: Console,
                         state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        s = await get_session(conn, console.tenant.id, session_id)
    if data.confirm != "yes":
        return _revoke_confirm(console, s)
    async with transaction(ctx.pool) as conn:
        await revoke_session(conn, console.actor, s.id, now=ctx.now())
    # next request refused (ADR 0005)
    await await_streams(ctx.pool, console.tenant.id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    notice = "session_revoked" if s.ended_at is None else "session_unchanged"
    return Redirect(f"/sessions?notice={notice}", status_code=303)


# ---------------------------------------------------------------- accounts


@get("/accounts")
async def accounts_page(console: Console, state: State,
                        q: str | None = Parameter(default=None, max_length=MAX_ACCOUNT_ID),
                        notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    async with ctx_of(state).pool.acquire() as conn:
        rows = await connected_accounts(conn, console.tenant.id, search=q or None)
    return console.page("accounts.html", nav="accounts", accounts=rows, q=q or "", notice=_NOTICES.get(notice or ""))


@get("/accounts/agents")
async def account_detail(console: Console, state: State,
                         account: str = Parameter(max_length=MAX_ACCOUNT_ID),
                         notice: str | None = Parameter(default=None, max_length=40)) -> Template:
    account = _account(account)
    async with ctx_of(state).pool.acquire() as conn:
        agents = await connected_agents(conn, console.tenant.id, account)
    return console.page("account.html", nav="accounts", account=account, agents=agents,
                        notice=_NOTICES.get(notice or ""))


def _disconnect_confirm(console: Console, account: str, client_id: str | None) -> Template:
    who = "this agent" if client_id else "every agent"
    return confirm_page(console, nav="accounts", title=f"Disconnect {who} from this account?",
                        message="Their Account Tokens are revoked and their Sessions signed out at once. They must "
                                "ask the user to sign in again.",
                        subject=f"{account}" + (f" · {client_id}" if client_id else ""),
                        action="/accounts/disconnect", button="Disconnect",
                        cancel="/accounts/agents?" + urlencode({"account": account}),
                        fields={"account": account, **({"client_id": client_id} if client_id else {})})


@get("/accounts/disconnect")
async def account_disconnect_confirm(console: Console, state: State,
                                     account: str = Parameter(max_length=MAX_ACCOUNT_ID),
                                     client_id: str | None = Parameter(default=None, max_length=2048)) -> Template:
    dev = ctx_of(state).settings.is_dev
    return _disconnect_confirm(console, _account(account), _client_id(client_id, dev) if client_id else None)


@post("/accounts/disconnect")
async def account_disconnect(data: Annotated[DisconnectForm, FORM], console: Console, state: State) -> Response[Any]:
    console.require("write")
    ctx = ctx_of(state)
    account = _account(data.account)
    client_id = _client_id(data.client_id, ctx.settings.is_dev) if data.client_id else None
    if data.confirm != "yes":
        return _disconnect_confirm(console, account, client_id)
    async with transaction(ctx.pool) as conn:
        await disconnect_account(conn, console.actor, account_id=account, client_id=client_id, now=ctx.now(),
                                 via="dashboard")
    # next request refused (ADR 0005)
    await await_streams(ctx.pool, console.tenant.id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    return Redirect("/accounts/agents?" + urlencode({"account": account, "notice": "account_disconnected"}),
                    status_code=303)


routes: list[Any] = [sessions_page, sessions_rows, session_detail, session_revoke_confirm, session_revoke,
                     accounts_page, account_detail, account_disconnect_confirm, account_disconnect]
