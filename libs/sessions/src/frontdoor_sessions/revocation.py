"""Sign-out by revocation (PAP §4.9, RFC 7009).

:func:`revoke_sign_ins` is the one way a family ends: the sign-ins are marked revoked,
every Account Token of them (rotations included) is revoked, and every Session signed
in from them is signed out, all in the caller's transaction with an ``account.revoked``
event per sign-in and a ``session.signed_out`` event per Session. The Sessions stay live
and bound to their account: renewal gives ``signed_in: false`` and introspection answers
signed out from the very next request.

:class:`Revocation` is ``POST {issuer}/oauth/revoke``: client-authenticated; an Account
Token of the calling client revokes its family; any other value (unknown, malformed,
another client's or another tenant's token, a Session Token) changes nothing and is
answered like a success, as RFC 7009 §2.2 asks, so the endpoint reveals nothing.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec
from frontdoor_protocol.errors import ProtocolError
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from .account_tokens import find_account_token, revoke_tokens_of_sign_ins
from .client_auth import authenticate_client
from .session_events import record_event
from .session_store import sign_out_sessions
from .token_endpoint import GrantDeps, GrantRefused, TenantIssuer

__all__ = ["Revocation", "RevocationRequest", "RevocationSummary", "revoke_sign_ins"]


class RevocationSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What a revocation changed."""

    sign_ins_revoked: int = 0
    tokens_revoked: int = 0
    sessions_signed_out: int = 0

    def __add__(self, other: RevocationSummary) -> RevocationSummary:
        return RevocationSummary(sign_ins_revoked=self.sign_ins_revoked + other.sign_ins_revoked,
                                 tokens_revoked=self.tokens_revoked + other.tokens_revoked,
                                 sessions_signed_out=self.sessions_signed_out + other.sessions_signed_out)


async def revoke_sign_ins(conn: asyncpg.Connection, tenant_id: str, sign_in_ids: list[str], *, now: datetime,
                          reason: str) -> RevocationSummary:
    """End whole families; idempotent (an already revoked family changes nothing)."""
    if not sign_in_ids:
        return RevocationSummary()
    rows = await conn.fetch(
        "UPDATE sign_ins SET revoked_at = $3, revoke_reason = $4"
        " WHERE tenant_id = $1 AND id = ANY($2::text[]) AND revoked_at IS NULL"
        " RETURNING id, client_id, user_id, account_id",
        tenant_id, sign_in_ids, now, reason,
    )
    tokens = await revoke_tokens_of_sign_ins(conn, tenant_id, sign_in_ids, now=now)
    sessions = await sign_out_sessions(conn, tenant_id, sign_in_ids)
    for r in rows:  # user_id is None for a 1.0 sign-in (the v1 payload allows null)
        await record_event(conn, tenant_id, "account.revoked", {
            "sign_in_id": r["id"], "client_id": r["client_id"], "user_id": r["user_id"], "account": r["account_id"],
            "reason": reason,
        }, now=now)
    for s in sessions:
        await record_event(conn, tenant_id, "session.signed_out", {
            "session_id": s.id, "client_id": s.client_id, "user_id": s.user_id, "sign_in_id": s.sign_in_id,
            "reason": reason,
        }, now=now)
    return RevocationSummary(sign_ins_revoked=len(rows), tokens_revoked=tokens, sessions_signed_out=len(sessions))


class RevocationRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The form of a revocation request (RFC 7009 §2.1)."""

    token: str | None = None
    token_type_hint: str | None = None
    client_id: str | None = None
    client_assertion_type: str | None = None
    client_assertion: str | None = None
    client_address: str = "unknown"


class Revocation:
    """The revocation endpoint of every tenant; one instance per process."""

    def __init__(self, deps: GrantDeps) -> None:
        self._deps = deps

    async def revoke(self, tenant: TenantIssuer, req: RevocationRequest, *, request_id: str | None = None) -> None:
        """Authenticate the client, then revoke its Account Token's family if it is one.

        Raises:
            GrantRefused: ``invalid_client``, ``invalid_request`` (no ``token``), ``rate_limited``.
            Unavailable: Redis cannot answer (fail closed, 503).
        """
        try:
            await self._revoke(tenant, req, request_id)
        except ProtocolError as exc:
            raise GrantRefused(exc) from None

    async def _revoke(self, tenant: TenantIssuer, req: RevocationRequest, request_id: str | None) -> None:
        d = self._deps
        now_dt = d.clock()
        await d.limit_network(tenant, req.client_address)
        auth = await authenticate_client(d.directory, tenant_id=tenant.tenant_id, issuer=tenant.issuer,
                                         client_id=req.client_id, assertion_type=req.client_assertion_type,
                                         assertion=req.client_assertion, now=int(now_dt.timestamp()))
        if not req.token:
            raise ProtocolError("invalid_request", "token is required.")
        await d.claim_once([auth.one_time])
        async with d.pool.acquire() as conn, conn.transaction():
            record = await find_account_token(conn, tenant.tenant_id, req.token, for_update=True)
            if record is None or record.client_id != auth.client_id:
                return  # RFC 7009 §2.2: nothing to do, and nothing revealed
            done = await revoke_sign_ins(conn, tenant.tenant_id, [record.sign_in_id], now=now_dt,
                                         reason="revoked_by_agent")
            if done.sign_ins_revoked:
                actor = Actor(tenant_id=tenant.tenant_id, type="system", request_id=request_id)
                await audit.record(conn, actor, "account_token.revoked", target_type="sign_in",
                                   target_id=record.sign_in_id,
                                   details={"client_id": auth.client_id, "account": record.account_id,
                                            "initiated_by": "agent", **msgspec.structs.asdict(done)})
