"""Disconnecting agents from accounts through the management API (PAP §4.9).

``POST /api/v1/accounts/{account}/disconnect`` ``{client_id?}``: every agent (or one)
loses its Account Tokens for the account and its Sessions are signed out.
``POST /api/v1/agents/revoke-tokens`` ``{client_id}``: every Account Token of one agent,
whatever the account (the agent may still start signed-out Sessions; block it for that).
Each call is audited; event rows are written for the webhooks.
"""

from __future__ import annotations

from typing import Any

import msgspec
from frontdoor_core.db import transaction
from frontdoor_core.errors import Invalid
from frontdoor_identity import check_client_id
from frontdoor_sessions import MAX_ACCOUNT_ID, RevocationSummary, await_streams, disconnect_account, disconnect_agent
from frontdoor_tenancy.actor import Actor
from litestar import post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from .deps import ctx_of, require_writer
from .problems import PROBLEMS

__all__ = ["routes"]


class DisconnectIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    client_id: str | None = None


class AgentTokensIn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    client_id: str


class DisconnectOut(msgspec.Struct, frozen=True, kw_only=True):
    account: str | None
    client_id: str | None
    sign_ins_revoked: int
    tokens_revoked: int
    sessions_signed_out: int


def _client_id(raw: str, dev: bool) -> str:
    try:
        return check_client_id(raw, allow_http_loopback=dev)
    except Exception:
        raise Invalid("invalid_client_id", "client_id must be the agent's https metadata URL.",
                      fields={"client_id": "not an https URL"}) from None


def _account(raw: str) -> str:
    if not 0 < len(raw) <= MAX_ACCOUNT_ID or raw.strip() != raw or "\x00" in raw:
        raise Invalid("invalid_account", "account must be your account ID (1 to 255 characters).",
                      fields={"account": "1 to 255 characters, no surrounding spaces"})
    return raw


def _out(account: str | None, client_id: str | None, done: RevocationSummary) -> DisconnectOut:
    return DisconnectOut(account=account, client_id=client_id, sign_ins_revoked=done.sign_ins_revoked,
                         tokens_revoked=done.tokens_revoked, sessions_signed_out=done.sessions_signed_out)


@post("/api/v1/accounts/{account:str}/disconnect", responses=PROBLEMS, status_code=200, tags=["accounts"],
      summary="Disconnect agents from one of your accounts",
      description="Revokes the Account Tokens of the account (all agents, or only client_id's) and signs out "
                  "their Sessions at once. The Sessions continue signed out.")
async def accounts_disconnect(account: FromPath[str], actor: NamedDependency[Actor], state: State,
                              data: JSONBody[DisconnectIn | None] = None) -> DisconnectOut:
    require_writer(actor)
    ctx = ctx_of(state)
    account_id = _account(account)
    client_id = None if data is None or data.client_id is None else _client_id(data.client_id, ctx.settings.is_dev)
    async with transaction(ctx.pool) as conn:
        done = await disconnect_account(conn, actor, account_id=account_id, client_id=client_id, now=ctx.now(),
                                        via="management_api")
    # next request refused (ADR 0005)
    await await_streams(ctx.pool, actor.tenant_id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    return _out(account_id, client_id, done)


@post("/api/v1/agents/revoke-tokens", responses=PROBLEMS, status_code=200, tags=["agents"],
      summary="Revoke every Account Token of an agent",
      description="Signs the agent out of every account; it can still start signed-out Sessions unless blocked.")
async def agents_revoke_tokens(data: JSONBody[AgentTokensIn], actor: NamedDependency[Actor],
                               state: State) -> DisconnectOut:
    require_writer(actor)
    ctx = ctx_of(state)
    client_id = _client_id(data.client_id, ctx.settings.is_dev)
    async with transaction(ctx.pool) as conn:
        done = await disconnect_agent(conn, actor, client_id=client_id, now=ctx.now(), via="management_api")
    # next request refused (ADR 0005)
    await await_streams(ctx.pool, actor.tenant_id, getattr(state, "ssf_policy", None), redis=ctx.redis)
    return _out(None, client_id, done)


routes: list[Any] = [accounts_disconnect, agents_revoke_tokens]
