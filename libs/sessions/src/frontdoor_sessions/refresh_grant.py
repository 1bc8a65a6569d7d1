"""The refresh_token grant: an Account Token signs a Session in (PAP §4.8).

1. per-network rate limit; client authentication; target resource and DPoP, as every
   grant; one-time claims; the per-agent Session limit; the agent policy;
2. the Account Token, looked up by hash within the tenant and locked: unknown, revoked,
   of a revoked sign-in, or issued to another client_id is ``invalid_grant`` (another
   client's token is left untouched, PAP-4.8-01/02). A token already *replaced* by
   rotation is ``invalid_grant`` and its reuse is written to the audit log; the family
   stays valid, as PAP requires (the peer suite checks that the current token keeps
   working after the old one is refused);
3. ``scope`` may narrow (it must be within the token's scope, else ``invalid_scope``:
   widening needs a new sign-in); what the tenant no longer offers for the sign-in's type
   is dropped;
4. with ``session_id``, that Session (live, same client_id and User ID as the token, else
   ``invalid_session``; never signed in to another account, else ``account_mismatch``,
   PAP-4.8-03/04); without, a fresh Session of the token's user. It is signed in from the
   token's sign-in (so revoking the family signs it out too);
5. rotation when the tenant's ``rotate_account_tokens`` is on: the old token is retired
   (compare-and-set) and a new one of the same family and scope is returned in
   ``refresh_token``.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.scopes import format_scope, parse_scope
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from . import session_store
from .account_tokens import AccountTokenRecord, find_account_token, insert_account_token, mark_replaced
from .session_store import SessionRecord
from .sign_in import sign_in_session_or_refuse
from .token_binding import bind_token
from .token_endpoint import GrantDeps, GrantOutcome, GrantRefused, TenantIssuer
from .token_request import REFRESH_TOKEN, TokenRequest
from .token_response import session_token_response

__all__ = ["RefreshGrant"]

def _invalid() -> ProtocolError:
    return ProtocolError("invalid_grant", "The Account Token is not valid.")


class _Reused(Exception):
    """A replaced token came back: revoke its family after the refusal's transaction."""

    def __init__(self, record: AccountTokenRecord) -> None:
        super().__init__("reused")
        self.record = record


class RefreshGrant:
    """Refreshes for every tenant; one instance per process."""

    grant_type = REFRESH_TOKEN

    def __init__(self, deps: GrantDeps) -> None:
        self._deps = deps

    async def issue(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        """Run the grant; see the module docstring.

        Raises:
            GrantRefused: any refusal.
            Unavailable: Redis cannot answer (fail closed, 503).
        """
        try:
            return await self._issue(tenant, req)
        except ProtocolError as exc:
            raise GrantRefused(exc) from None

    async def _issue(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        d = self._deps
        start = await d.authenticate(tenant, req)
        now_dt, now, auth = start.now_dt, start.now, start.auth
        binding = bind_token(d.nonces, tenant, req, now=now)
        if not req.refresh_token:
            raise ProtocolError("invalid_request", "refresh_token is required.")
        narrowed: tuple[str, ...] | None = None
        if req.scope is not None:
            try:
                narrowed = parse_scope(req.scope)
            except ValueError:
                raise ProtocolError("invalid_scope", "scope is not a space-separated list of scopes.") from None
        await d.claim_once([auth.one_time, *([binding.one_time] if binding.one_time else [])])
        await d.limit_agent(tenant, auth.client_id)

        async with d.pool.acquire() as conn:
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=auth.client_id)
            if not is_allowed(policy, auth.client_id):
                raise ProtocolError("unauthorized_client", "This agent may not sign in here.")
            try:
                async with conn.transaction():
                    session, new_token = await self._refresh(conn, tenant, req, client_id=auth.client_id,
                                                             narrowed=narrowed, now=now_dt)
            except _Reused as reused:
                await self._revoke_reused(conn, tenant, reused.record, now_dt)
                raise _invalid() from None
            return await session_token_response(conn, d.keys, tenant, session, binding, now=now_dt,
                                                refresh_token=new_token)

    async def _refresh(self, conn: asyncpg.Connection, tenant: TenantIssuer, req: TokenRequest, *, client_id: str,
                       narrowed: tuple[str, ...] | None, now: datetime) -> tuple[SessionRecord, str | None]:
        record = await find_account_token(conn, tenant.tenant_id, req.refresh_token or "", for_update=True)
        if record is None or record.client_id != client_id or record.revoked_at is not None:
            raise _invalid()
        if record.replaced_at is not None:
            raise _Reused(record)
        family = await conn.fetchrow(
            "SELECT type, revoked_at FROM sign_ins WHERE tenant_id = $1 AND id = $2", tenant.tenant_id,
            record.sign_in_id)
        if family is None or family["revoked_at"] is not None:
            raise _invalid()
        held = parse_scope(record.scope)
        wanted = narrowed if narrowed is not None else held
        if any(s not in held for s in wanted):
            raise ProtocolError("invalid_scope", "A refresh may narrow the scope, never widen it.")
        offer = getattr(tenant.settings, family["type"], None)
        offered = set(getattr(offer, "scopes", ())) & set(tenant.settings.all_scopes())
        scope_tokens = [s for s in wanted if s in offered]
        if not scope_tokens:
            raise ProtocolError("invalid_scope", "None of these scopes is offered any more.")
        scope = format_scope(scope_tokens)

        if record.user_id is None:  # a 1.0 family cannot sign a 0.2 Session in
            raise ProtocolError("invalid_grant", "The Account Token is not valid.")
        if req.session_id is not None:
            found = await session_store.find_session(conn, tenant.tenant_id, req.session_id)
            if (found is None or not found.live or found.client_id != client_id
                    or found.user_id != record.user_id):
                raise ProtocolError("invalid_session", "The session_id does not name a live Session of this user.")
            session = found
        else:
            session = await session_store.create_session(conn, tenant.tenant_id, client_id, record.user_id, now=now)
        signed = await sign_in_session_or_refuse(conn, tenant.tenant_id, session, account_id=record.account_id,
                                                 scope=scope, sign_in_id=record.sign_in_id, now=now)
        new_token: str | None = None
        if tenant.settings.rotate_account_tokens:
            if not await mark_replaced(conn, tenant.tenant_id, record.id, now=now):
                raise _invalid()
            _, new_token = await insert_account_token(
                conn, tenant.tenant_id, sign_in_id=record.sign_in_id, client_id=client_id, user_id=record.user_id,
                account_id=record.account_id, scope=record.scope, now=now)
        return signed, new_token

    @staticmethod
    async def _revoke_reused(conn: asyncpg.Connection, tenant: TenantIssuer, record: AccountTokenRecord,
                             now: datetime) -> None:
        """Record the reuse of a replaced token for the tenant's admins (the family stays)."""
        await audit.record(conn, Actor(tenant_id=tenant.tenant_id, type="system"),
                           "account_token.reuse_detected", target_type="sign_in", target_id=record.sign_in_id,
                           details={"client_id": record.client_id, "account": record.account_id}, at=now)
