"""``POST {issuer}/oauth/device``: start a Device Sign-In (PAP §4.6, RFC 8628 §3.1-3.2).

Client-authenticated like the token endpoint (no DPoP: nothing is issued here). The
``scope`` is required and must be offered for Device Sign-In (``invalid_scope``,
PAP-4.4-02). The answer carries the device code (for the agent only), the user code,
the verification links on the issuer's own host (PAP-4.6-02), ``expires_in`` and
``interval``. Opening the links approves nothing (PAP-4.6-01).

The same start serves both profiles: the poll decides (a ``session_id`` or not, ADR 0004
§4). When the tenant serves only PAP 1.0 the sign-in can only be a 1.0 one, so the agent's
document must declare ``private_key_jwt`` and ``redirect_uris`` here already [S §3].

Each start is recorded as a sign-in attempt (`sign_in_attempts`), for the agent funnel.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from frontdoor_identity import get_agent_policy, is_allowed
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.scopes import format_scope

from .access_token_response import require_sign_in_metadata
from .device_flow import DeviceStore
from .sign_in import allowed_scopes, requested_scopes
from .sign_in_attempts import device_attempt_id, record_prompt
from .token_endpoint import GrantDeps, GrantOutcome, GrantRefused, TenantIssuer
from .token_request import TokenRequest

__all__ = ["DeviceAuthorization"]


class DeviceAuthorization:
    """Starts Device Sign-Ins for every tenant; one instance per process."""

    def __init__(self, deps: GrantDeps, store: DeviceStore) -> None:
        self._deps = deps
        self._store = store

    async def start(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        """Validate, then answer the device authorization response.

        ``req`` carries the form's ``client_id``, ``client_assertion(_type)`` and ``scope``.

        Raises:
            GrantRefused: any refusal (``invalid_client``, ``invalid_scope``, ``unauthorized_client``...).
            Unavailable: Redis cannot answer (fail closed, 503).
        """
        try:
            return await self._start(tenant, req)
        except ProtocolError as exc:
            raise GrantRefused(exc) from None

    async def _start(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        d = self._deps
        start = await d.authenticate(tenant, req)
        now_dt, auth = start.now_dt, start.auth
        allowed = allowed_scopes(tenant.settings, "device")
        if not allowed:
            raise ProtocolError("unauthorized_client", "Device Sign-In is not offered here.")
        scope = format_scope(requested_scopes(req.scope, allowed))
        await d.claim_once([auth.one_time])
        await d.limit_agent(tenant, auth.client_id)
        async with d.pool.acquire() as conn:
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=auth.client_id)
        if not is_allowed(policy, auth.client_id):
            raise ProtocolError("unauthorized_client", "This agent may not sign in here.")
        if not tenant.settings.protocol.serves("0.2"):
            require_sign_in_metadata(auth.client.metadata)
        started = await self._store.start(tenant.tenant_id, client_id=auth.client_id, scope=scope, now=now_dt)
        async with d.pool.acquire() as conn:  # the agent prompts the user now: the funnel's attempt
            await record_prompt(conn, tenant.tenant_id, device_attempt_id(started.handle), client_id=auth.client_id,
                                sign_in_type="device", now=now_dt,
                                expires_at=now_dt + timedelta(seconds=started.expires_in))
        verification_uri = f"{tenant.issuer}/device"
        body: dict[str, Any] = {
            "device_code": started.device_code,
            "user_code": started.user_code,
            "verification_uri": verification_uri,
            "verification_uri_complete": f"{verification_uri}?user_code={started.user_code}",
            "expires_in": started.expires_in,
            "interval": started.interval,
        }
        return GrantOutcome(body=body, headers={})
