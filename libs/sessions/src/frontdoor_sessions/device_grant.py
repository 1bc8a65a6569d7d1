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
"""

from __future__ import annotations

from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError

from . import session_store
from .device_flow import DeviceStore
from .sign_in import complete_sign_in
from .token_binding import bind_token
from .token_endpoint import GrantDeps, GrantOutcome, GrantRefused, TenantIssuer
from .token_request import DEVICE_CODE, TokenRequest
from .token_response import session_token_response

__all__ = ["DeviceCodeGrant"]

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
                    requested_scope=polled.scope,
                )
            except ProtocolError:
                raise  # the agent's problem (account_mismatch, ...): the code stays used
            except Exception:
                await self._store.give_back(tenant.tenant_id, polled.handle)
                raise
            return await session_token_response(conn, d.keys, tenant, done.session, binding, now=now_dt,
                                                refresh_token=done.account_token)
