"""The authorization_code grant: the end of Direct Sign-In (PAP §4.5, RFC 6749 §4.1.3, RFC 7636).

1. per-network rate limit; client authentication; target resource and DPoP, as every
   grant; ``code``, ``code_verifier``, ``redirect_uri`` and ``session_id`` are required
   (``invalid_request``); one-time claims; the agent policy and Direct Sign-In being on
   (``unauthorized_client``);
2. the code is taken once (`AuthorizationCodeStore.take`): unknown, expired or issued to
   another client is ``invalid_grant``. Presented again, it is ``invalid_grant`` too, and
   the sign-in the first redemption issued is revoked: its Account Token and the Session
   it signed in (RFC 6749 §4.1.2, `revoke_sign_ins`); the reuse is audited;
3. ``redirect_uri`` must be the one of the authorization request, byte for byte, and
   ``BASE64URL(SHA256(code_verifier))`` its ``code_challenge`` (``invalid_grant``);
4. ``session_id`` must name a live Session of the same client (``invalid_session``); its
   User ID becomes the signed-in user: `complete_sign_in` (type ``direct``, the granted
   scope within the requested one and the tenant's offer) answers the Session Token of the
   now signed-in Session and ``refresh_token``, the Account Token.

A code taken by a request that then failed on our side (the database, Redis) is given
back so that the agent's retry can work; a refusal (PKCE, Session, account) keeps it used.

PAP 1.0 (ADR 0004 §4, [S §5]): a redemption **without** ``session_id`` to a tenant serving
1.0 checks the same code, ``redirect_uri`` and PKCE, then completes a 1.0 sign-in
(`complete_delegated_sign_in`) and answers an RFC 9068 access token with the refresh token
(no ``session_id``, no ``signed_in``). A code issued to an RFC 8252 loopback redirect URI
(`IssuedCode.profile` ``1.0``) cannot be redeemed for a 0.2 Session (``invalid_grant``);
a ``session_id`` to a tenant that does not serve 0.2 is ``invalid_request``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import datetime
from typing import Any

import asyncpg
from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError
from frontdoor_tenancy import audit
from frontdoor_tenancy.actor import Actor

from . import session_store
from .access_token_response import (
    AccessBinding,
    access_token_response,
    bind_access_token,
    protected_resources,
    record_agent_seen,
    require_sign_in_metadata,
    token_profile,
)
from .authorization_codes import AuthorizationCodeStore, CodeTake
from .introspection_cache import publish_current_head
from .revocation import revoke_sign_ins
from .sign_in import allowed_scopes, complete_delegated_sign_in, complete_sign_in
from .token_binding import bind_token
from .token_endpoint import GrantDeps, GrantOutcome, GrantRefused, TenantIssuer
from .token_request import AUTHORIZATION_CODE, TokenRequest
from .token_response import session_token_response

__all__ = ["AuthorizationCodeGrant", "s256_challenge"]

# RFC 7636 §4.1: 43 to 128 unreserved characters.
_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")


def s256_challenge(verifier: str) -> str:
    """``BASE64URL(SHA256(ASCII(code_verifier)))`` without padding (RFC 7636 §4.2)."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).decode().rstrip("=")


def _invalid(description: str = "The authorization code is not valid.") -> ProtocolError:
    return ProtocolError("invalid_grant", description)


class AuthorizationCodeGrant:
    """Redeems Direct Sign-In codes for every tenant; one instance per process."""

    grant_type = AUTHORIZATION_CODE

    def __init__(self, deps: GrantDeps, store: AuthorizationCodeStore) -> None:
        self._deps = deps
        self._store = store

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
        client_id = auth.client_id
        profile = token_profile(tenant, req)
        binding: Any = bind_token(d.nonces, tenant, req, now=now) if profile == "0.2" else None
        if not req.code or not req.code_verifier or not req.redirect_uri or (profile == "0.2" and not req.session_id):
            raise ProtocolError("invalid_request", "code, code_verifier, redirect_uri and session_id are required."
                                if profile == "0.2" else "code, code_verifier and redirect_uri are required.")
        async with d.pool.acquire() as conn:
            if profile == "1.0":
                resources = await protected_resources(conn, tenant) if req.resource is not None else None
                binding = bind_access_token(d.nonces, tenant, req, now=now, resources=resources)
            await d.claim_once([auth.one_time, *([binding.one_time] if binding.one_time else [])])
            if not allowed_scopes(tenant.settings, "direct"):
                raise ProtocolError("unauthorized_client", "Direct Sign-In is not offered here.")
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
            if not is_allowed(policy, client_id):
                raise ProtocolError("unauthorized_client", "This agent may not sign in here.")
            if profile == "1.0":
                require_sign_in_metadata(auth.client.metadata)
            taken = await self._store.take(tenant.tenant_id, req.code, client_id=client_id, now=now_dt)
            if taken.status == "used":
                await self._revoke_reused(conn, tenant, client_id, taken.sign_in_id, now_dt)
                raise _invalid()
            if taken.status != "taken" or taken.code is None:
                raise _invalid()
            issued = taken.code
            if not hmac.compare_digest(req.redirect_uri.encode(), issued.redirect_uri.encode()):
                raise _invalid("redirect_uri is not the one of the authorization request.")
            if (not _VERIFIER.fullmatch(req.code_verifier)
                    or not hmac.compare_digest(s256_challenge(req.code_verifier), issued.code_challenge)):
                raise _invalid("The code_verifier does not match the code_challenge.")
            if profile == "1.0":
                return await self._complete_delegated(conn, tenant, auth, taken, binding=binding, now=now_dt)
            if issued.profile == "1.0":  # a loopback redirect URI (RFC 8252) is for 1.0 sign-ins only
                raise _invalid()
            session = await session_store.find_session(conn, tenant.tenant_id, req.session_id or "")
            if session is None or not session.live or session.client_id != client_id:
                raise ProtocolError("invalid_session", "The session_id does not name a live Session of this agent.")
            try:
                done = await complete_sign_in(
                    conn, tenant_id=tenant.tenant_id, session_id=session.id, client_id=client_id,
                    user_id=session.user_id, account_id=issued.account_id, granted_scope=issued.scope,
                    sign_in_type="direct", now=now_dt, requested_scope=issued.requested_scope,
                    idp_session=issued.idp_session, login_via=issued.login_via,
                )
            except ProtocolError:
                raise  # the agent's problem (account_mismatch, ...): the code stays used
            except Exception:
                await self._store.give_back(tenant.tenant_id, taken.handle)
                raise
            if await self._store.bind_sign_in(tenant.tenant_id, taken.handle, done.sign_in_id):
                # Presented again while this redemption ran: what it issued does not survive.
                await self._revoke_reused(conn, tenant, client_id, done.sign_in_id, now_dt)
                raise _invalid()
            await publish_current_head(d.redis, conn, tenant.tenant_id)  # introspection sees the sign-in
            return await session_token_response(conn, d.keys, tenant, done.session, binding, now=now_dt,
                                                refresh_token=done.account_token)

    async def _complete_delegated(self, conn: asyncpg.Connection, tenant: TenantIssuer, auth: Any, taken: CodeTake, *,
                                  binding: AccessBinding, now: datetime) -> GrantOutcome:
        """The 1.0 end of Direct Sign-In: a sign-in independent of Session identity [S §5]."""
        d = self._deps
        issued = taken.code
        assert issued is not None
        try:
            done = await complete_delegated_sign_in(
                conn, tenant_id=tenant.tenant_id, client_id=auth.client_id, account_id=issued.account_id,
                granted_scope=issued.scope, sign_in_type="direct", now=now, requested_scope=issued.requested_scope,
                idp_session=issued.idp_session, login_via=issued.login_via,
            )
        except ProtocolError:
            raise
        except Exception:
            await self._store.give_back(tenant.tenant_id, taken.handle)
            raise
        if await self._store.bind_sign_in(tenant.tenant_id, taken.handle, done.sign_in_id):
            await self._revoke_reused(conn, tenant, auth.client_id, done.sign_in_id, now)
            raise _invalid()
        await record_agent_seen(d, conn, tenant, auth, now=now)
        return await access_token_response(conn, d.keys, tenant, binding, client_id=auth.client_id,
                                           account_id=done.account_id, scope=done.scope, sign_in_id=done.sign_in_id,
                                           now=now, refresh_token=done.account_token)

    async def _revoke_reused(self, conn: asyncpg.Connection, tenant: TenantIssuer, client_id: str,
                             sign_in_id: str | None, now: datetime) -> None:
        """Revoke what a reused code issued, if anything, and audit the reuse."""
        async with conn.transaction():
            if sign_in_id is not None:
                await revoke_sign_ins(conn, tenant.tenant_id, [sign_in_id], now=now, reason="authorization_code_reused")
            await audit.record(conn, Actor(tenant_id=tenant.tenant_id, type="system"),
                               "authorization_code.reuse_detected", target_type="sign_in", target_id=sign_in_id,
                               details={"client_id": client_id}, at=now)
        await publish_current_head(self._deps.redis, conn, tenant.tenant_id)  # introspection sees the sign-out
