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

PAP 1.0 (ADR 0004 §4, [S §5]): the family decides the profile. A 1.0 family (a sign-in
without a User ID) takes no ``session_id`` (``invalid_grant``) and answers an RFC 9068
access token for the (possibly narrowed) scope, ``sgn`` = the family, DPoP-bound when a
proof came, else Bearer, with the rotated refresh token; the same checks, rotation and
reuse detection as 0.2 apply. An unknown token is judged by the request (`token_profile`).
A 0.2 family is refused (``invalid_grant``) by a tenant that no longer serves 0.2, and a
1.0 family by one that no longer serves 1.0.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.scopes import format_scope, parse_scope
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from . import session_store
from .access_token_response import (
    access_token_response,
    bind_access_token,
    protected_resources,
    record_agent_seen,
    token_profile,
)
from .account_tokens import AccountTokenRecord, find_account_token, insert_account_token, mark_replaced
from .introspection_cache import publish_current_head
from .session_retention import renewable
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

    def __init__(self, deps: GrantDeps, *, idle_lifetime: timedelta = timedelta(days=90)) -> None:
        self._deps = deps
        self._idle_lifetime = idle_lifetime

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
        if not req.refresh_token:
            raise ProtocolError("invalid_request", "refresh_token is required.")
        profile = await self._profile(tenant, req)
        binding: Any
        if profile == "1.0":
            async with d.pool.acquire() as conn:
                resources = await protected_resources(conn, tenant) if req.resource is not None else None
            binding = bind_access_token(d.nonces, tenant, req, now=now, resources=resources)
        else:
            binding = bind_token(d.nonces, tenant, req, now=now)
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
            if profile == "1.0":
                try:
                    async with conn.transaction():
                        record, scope = await self._checked(conn, tenant, req, client_id=auth.client_id,
                                                            narrowed=narrowed, profile="1.0")
                        new_token = await self._rotate(conn, tenant, record, now=now_dt)
                except _Reused as reused:
                    await self._revoke_reused(conn, tenant, reused.record, now_dt)
                    raise _invalid() from None
                await record_agent_seen(d, conn, tenant, auth, now=now_dt)
                return await access_token_response(conn, d.keys, tenant, binding, client_id=auth.client_id,
                                                   account_id=record.account_id, scope=scope,
                                                   sign_in_id=record.sign_in_id, now=now_dt, refresh_token=new_token)
            try:
                async with conn.transaction():
                    session, new_token = await self._refresh(conn, tenant, req, client_id=auth.client_id,
                                                             narrowed=narrowed, now=now_dt)
            except _Reused as reused:
                await self._revoke_reused(conn, tenant, reused.record, now_dt)
                raise _invalid() from None
            await publish_current_head(d.redis, conn, tenant.tenant_id)  # a narrowed scope, at once
            return await session_token_response(conn, d.keys, tenant, session, binding, now=now_dt,
                                                refresh_token=new_token)

    async def _profile(self, tenant: TenantIssuer, req: TokenRequest) -> str:
        """The family's profile (a 1.0 sign-in has no User ID); an unknown token's is the request's."""
        async with self._deps.pool.acquire() as conn:
            peek = await find_account_token(conn, tenant.tenant_id, req.refresh_token or "")
        if peek is None:
            return token_profile(tenant, req)
        profile = "1.0" if peek.user_id is None else "0.2"
        if not tenant.settings.protocol.serves(profile):
            if req.session_id is not None and profile == "0.2":
                token_profile(tenant, req)  # invalid_request: session_id where 0.2 is not served
            raise _invalid()
        if profile == "1.0" and req.session_id is not None:
            raise _invalid()  # a 1.0 family cannot sign a 0.2 Session in
        return profile

    async def _checked(self, conn: asyncpg.Connection, tenant: TenantIssuer, req: TokenRequest, *, client_id: str,
                       narrowed: tuple[str, ...] | None, profile: str) -> tuple[AccountTokenRecord, str]:
        """The locked, live token of this client and the scope to grant (narrowed, still offered)."""
        record = await find_account_token(conn, tenant.tenant_id, req.refresh_token or "", for_update=True)
        if record is None or record.client_id != client_id or record.revoked_at is not None:
            raise _invalid()
        if (record.user_id is None) != (profile == "1.0"):
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
        return record, format_scope(scope_tokens)

    @staticmethod
    async def _rotate(conn: asyncpg.Connection, tenant: TenantIssuer, record: AccountTokenRecord, *,
                      now: datetime) -> str | None:
        """Retire the token and issue the family's next one when the tenant rotates (same scope)."""
        if not tenant.settings.rotate_account_tokens:
            return None
        if not await mark_replaced(conn, tenant.tenant_id, record.id, now=now):
            raise _invalid()
        _, new_token = await insert_account_token(
            conn, tenant.tenant_id, sign_in_id=record.sign_in_id, client_id=record.client_id,
            user_id=record.user_id, account_id=record.account_id, scope=record.scope, now=now)
        return new_token

    async def _refresh(self, conn: asyncpg.Connection, tenant: TenantIssuer, req: TokenRequest, *, client_id: str,
                       narrowed: tuple[str, ...] | None, now: datetime) -> tuple[SessionRecord, str | None]:
        record, scope = await self._checked(conn, tenant, req, client_id=client_id, narrowed=narrowed, profile="0.2")
        user_id = record.user_id or ""
        if req.session_id is not None:
            found = await session_store.find_session(conn, tenant.tenant_id, req.session_id)
            if (found is None or found.client_id != client_id or found.user_id != user_id
                    or not renewable(last_used_at=found.last_used_at, ended_at=found.ended_at, now=now,
                                     idle_lifetime=self._idle_lifetime)):
                raise ProtocolError("invalid_session", "The session_id does not name a live Session of this user.")
            session = found
        else:
            session = await session_store.create_session(conn, tenant.tenant_id, client_id, user_id, now=now)
        signed = await sign_in_session_or_refuse(conn, tenant.tenant_id, session, account_id=record.account_id,
                                                 scope=scope, sign_in_id=record.sign_in_id, now=now)
        return signed, await self._rotate(conn, tenant, record, now=now)

    @staticmethod
    async def _revoke_reused(conn: asyncpg.Connection, tenant: TenantIssuer, record: AccountTokenRecord,
                             now: datetime) -> None:
        """Record the reuse of a replaced token for the tenant's admins (the family stays)."""
        await audit.record(conn, Actor(tenant_id=tenant.tenant_id, type="system"),
                           "account_token.reuse_detected", target_type="sign_in", target_id=record.sign_in_id,
                           details={"client_id": record.client_id, "account": record.account_id}, at=now)
