"""The device_code grant (PAP §4.6, RFC 8628 §3.4-3.5): the agent polls, then is signed in.

1. per-network rate limit; client authentication; target resource and DPoP, exactly as
   the Session grant (`client_auth`, `token_binding`); one-time claims;
2. ``device_code`` and ``session_id`` are required (``invalid_request``); the Session must
   be a live Session of this client (``invalid_session``); the agent must still be allowed;
3. one atomic poll (`DeviceStore.poll`): ``authorization_pending``, ``slow_down`` (interval
   +5 s, remembered), ``access_denied``, ``expired_token``; an unknown code, another
   client's, one already used or one first polled for another User ID is ``invalid_grant``;
4. an approval is taken once and completes the sign-in (`complete_sign_in`): the answer is
   the Session Token of the now signed-in Session (``signed_in: true``, ``scope`` as
   granted) and ``refresh_token``, the Account Token.

PAP 1.0 (ADR 0004 §4, [S §5]): a poll **without** ``session_id`` to a tenant serving 1.0
signs no Session in. The agent's document must declare ``private_key_jwt`` and
``redirect_uris`` [S §3]; the approval completes a 1.0 sign-in
(`complete_delegated_sign_in`) and the answer is an RFC 9068 access token (``sgn`` = the
sign-in; DPoP-bound when a proof came, else Bearer; ``aud`` the issuer or the requested
protected resource) with the refresh token, and no ``session_id`` or ``signed_in``. A
``session_id`` to a tenant that does not serve 0.2 is ``invalid_request``.
"""

from __future__ import annotations

from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError

from . import session_store
from .access_token_response import (
    access_token_response,
    bind_access_token,
    protected_resources,
    record_agent_seen,
    require_sign_in_metadata,
    token_profile,
)
from .device_flow import DeviceStore
from .introspection_cache import publish_current_head
from .sign_in import complete_delegated_sign_in, complete_sign_in
from .token_binding import bind_token
from .token_endpoint import AuthenticatedRequest, GrantDeps, GrantOutcome, GrantRefused, TenantIssuer
from .token_request import DEVICE_CODE, TokenRequest
from .token_response import session_token_response

__all__ = ["DeviceCodeGrant"]

NO_USER = "\x00"
"""What a 1.0 poll binds the device code to instead of a User ID (no User ID has a NUL)."""

_REFUSALS: dict[str, tuple[str, str]] = {
    "pending": ("authorization_pending", "The user has not finished yet."),
    "slow_down": ("slow_down", "Polling too fast; wait 5 more seconds between polls."),
    "denied": ("access_denied", "The user refused."),
    "expired": ("expired_token", "The device code has expired; start again."),
    "used": ("invalid_grant", "The device code is not valid."),
    "unknown": ("invalid_grant", "The device code is not valid."),
    "wrong_client": ("invalid_grant", "The device code is not valid."),
    "wrong_user": ("invalid_grant", "The device code was polled for another user."),
}


class DeviceCodeGrant:
    """Answers device polls for every tenant; one instance per process."""

    grant_type = DEVICE_CODE

    def __init__(self, deps: GrantDeps, store: DeviceStore) -> None:
        self._deps = deps
        self._store = store

    async def issue(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        """Run the grant; see the module docstring.

        Raises:
            GrantRefused: any refusal, the RFC 8628 polling answers included.
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
        if token_profile(tenant, req) == "1.0":
            return await self._issue_delegated(tenant, req, start)
        binding = bind_token(d.nonces, tenant, req, now=now)
        if not req.device_code or not req.session_id:
            raise ProtocolError("invalid_request", "device_code and session_id are required.")
        await d.claim_once([auth.one_time, *([binding.one_time] if binding.one_time else [])])
        async with d.pool.acquire() as conn:
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
            if not is_allowed(policy, client_id):
                raise ProtocolError("unauthorized_client", "This agent may not sign in here.")
            session = await session_store.find_session(conn, tenant.tenant_id, req.session_id)
            if session is None or not session.live or session.client_id != client_id:
                raise ProtocolError("invalid_session", "The session_id does not name a live Session of this agent.")
            polled = await self._store.poll(tenant.tenant_id, req.device_code, client_id=client_id,
                                            user_id=session.user_id, now=now_dt)
            if polled.status != "approved":
                raise ProtocolError(*_REFUSALS[polled.status])
            try:
                done = await complete_sign_in(
                    conn, tenant_id=tenant.tenant_id, session_id=session.id, client_id=client_id,
                    user_id=session.user_id, account_id=polled.account_id or "",
                    granted_scope=polled.granted_scope or "", sign_in_type="device", now=now_dt,
                    requested_scope=polled.scope, idp_session=polled.idp_session, login_via=polled.login_via,
                )
            except ProtocolError:
                raise  # the agent's problem (account_mismatch, ...): the code stays used
            except Exception:
                await self._store.give_back(tenant.tenant_id, polled.handle)
                raise
            await publish_current_head(d.redis, conn, tenant.tenant_id)  # introspection sees the sign-in
            return await session_token_response(conn, d.keys, tenant, done.session, binding, now=now_dt,
                                                refresh_token=done.account_token)

    async def _issue_delegated(self, tenant: TenantIssuer, req: TokenRequest, start: AuthenticatedRequest
                               ) -> GrantOutcome:
        """The 1.0 poll: a sign-in independent of Session identity [S §5]."""
        d = self._deps
        now_dt, now, auth = start.now_dt, start.now, start.auth
        client_id = auth.client_id
        if not req.device_code:
            raise ProtocolError("invalid_request", "device_code is required.")
        async with d.pool.acquire() as conn:
            resources = await protected_resources(conn, tenant) if req.resource is not None else None
            binding = bind_access_token(d.nonces, tenant, req, now=now, resources=resources)
            await d.claim_once([auth.one_time, *([binding.one_time] if binding.one_time else [])])
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
            if not is_allowed(policy, client_id):
                raise ProtocolError("unauthorized_client", "This agent may not sign in here.")
            require_sign_in_metadata(auth.client.metadata)
            polled = await self._store.poll(tenant.tenant_id, req.device_code, client_id=client_id,
                                            user_id=NO_USER, now=now_dt)
            if polled.status != "approved":
                raise ProtocolError(*_REFUSALS[polled.status])
            try:
                done = await complete_delegated_sign_in(
                    conn, tenant_id=tenant.tenant_id, client_id=client_id, account_id=polled.account_id or "",
                    granted_scope=polled.granted_scope or "", sign_in_type="device", now=now_dt,
                    requested_scope=polled.scope, idp_session=polled.idp_session, login_via=polled.login_via,
                )
            except ProtocolError:
                raise  # the agent's problem: the code stays used
            except Exception:
                await self._store.give_back(tenant.tenant_id, polled.handle)
                raise
            await record_agent_seen(d, conn, tenant, auth, now=now_dt)
            return await access_token_response(conn, d.keys, tenant, binding, client_id=client_id,
                                               account_id=done.account_id, scope=done.scope,
                                               sign_in_id=done.sign_in_id, now=now_dt,
                                               refresh_token=done.account_token)
