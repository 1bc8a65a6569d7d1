"""The jwt-bearer Session grant (PAP §4.2, §4.3): validate, then issue.

Order matters for cost and for what an unauthenticated caller can learn:

1. per-network rate limit on unverified requests;
2. client authentication (`client_auth`, PAP-4.1-05);
3. the target resource and the DPoP proof (`token_binding`);
4. the Session assertion (PAP-4.2-07/08);
5. one-time ``jti`` claims in Redis for the client assertion, the Session assertion and
   the DPoP proof (fail closed when Redis is down), and
6. the per-agent Session rate limit (only now: the caller is authenticated; a replay is
   not counted), both in one script, one round trip;
7. the tenant's agent policy, read on every request (a blocked agent is
   ``unauthorized_client``), then the Session: new (the policy is read by the ``INSERT``
   itself) unless the tenant may not start new Sessions now (the ``admission`` hook,
   billing: ``503 temporarily_unavailable`` with ``Retry-After``, asked only here, after the
   caller is authenticated, so an unauthenticated one learns nothing), or renewed when ``session_id`` names a live Session of the same agent and
   user (else ``invalid_session``, PAP-4.2-04).
   A renewed Session keeps its state: signed in with its scope, or signed out after a
   sign-out (PAP §4.9);
8. a Session Token signed by the tenant's issuer key (`token_response`).

A tenant that does not serve PAP 0.2 answers ``unsupported_grant_type`` before anything
else (ADR 0004 §1: its metadata does not list the grant either).

Cost: two Redis round trips (the network limit; the claims with the agent's count) and
one SQL statement per new Session (the agent's "last seen" is written at most once a
minute per process); signatures: three verifies and one signing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from frontdoor_identity import get_agent_policy, is_allowed, record_seen
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.session_assertion import verify_session_assertion

from . import session_store
from .client_auth import verify_with_refresh
from .new_session_admission import Admission
from .session_retention import renewable
from .token_binding import bind_token
from .token_endpoint import SKEW, GrantDeps, GrantOutcome, GrantRefused, OneTimeValue, TenantIssuer
from .token_request import JWT_BEARER, TokenRequest
from .token_response import session_token_response

__all__ = ["SessionGrant"]


def _refused_agent() -> ProtocolError:
    return ProtocolError("unauthorized_client", "This agent may not start Sessions here.")


class SessionGrant:
    """Issues Sessions for every tenant; one instance per process."""

    grant_type = JWT_BEARER

    def __init__(self, deps: GrantDeps, *, admission: Admission | None = None,
                 idle_lifetime: timedelta = timedelta(days=90)) -> None:
        self._deps = deps
        self._admission = admission
        self._idle_lifetime = idle_lifetime

    async def issue(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        """Run the grant.

        Raises:
            GrantRefused: any protocol refusal, with the headers it needs.
            Unavailable: Redis cannot answer a replay check (fail closed, 503).
        """
        try:
            return await self._issue(tenant, req)
        except ProtocolError as exc:
            raise GrantRefused(exc) from None

    async def _issue(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        if not tenant.settings.protocol.serves("0.2"):
            raise ProtocolError("unsupported_grant_type", "This grant type is not supported here.")
        d = self._deps
        start = await d.authenticate(tenant, req)
        now_dt, now, auth = start.now_dt, start.now, start.auth
        client_id = auth.client_id
        binding = bind_token(d.nonces, tenant, req, now=now)
        if not req.assertion:
            raise ProtocolError("invalid_request", "assertion is required.")
        assertion: Any = await verify_with_refresh(d.directory, auth.client, lambda ks: verify_session_assertion(
            req.assertion or "", client_id=client_id, issuer=tenant.issuer, keys=ks, now=now))
        one_time = [auth.one_time,
                    OneTimeValue("session-assertion", f"{tenant.tenant_id}\x00{client_id}", assertion.jti,
                                 assertion.exp - now + SKEW,
                                 ProtocolError("invalid_grant", "The assertion was already used."))]
        if binding.one_time is not None:
            one_time.append(binding.one_time)
        await d.claim_once_then_limit_agent(one_time, tenant, client_id)  # one round trip
        if req.session_id is None and self._admission is not None:
            retry_after = await self._admission(tenant.tenant_id)
            if retry_after is not None:
                raise GrantRefused(ProtocolError("temporarily_unavailable", "New Sessions cannot start here right now."),
                                   {"Retry-After": str(retry_after)})

        # One connection, no explicit transaction: each write below is a single statement.
        async with d.pool.acquire() as conn:
            # The policy is read on every request, never cached: a block applies at once.
            if req.session_id is not None:
                policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
                if not is_allowed(policy, client_id):
                    raise _refused_agent()
                session = await session_store.find_session(conn, tenant.tenant_id, req.session_id)
                if (session is None or session.client_id != client_id
                        or not renewable(last_used_at=session.last_used_at, ended_at=session.ended_at, now=now_dt,
                                         idle_lifetime=self._idle_lifetime)
                        or session.user_id != assertion.user_id):
                    raise ProtocolError("invalid_session", "The session_id does not name a live Session of this user.")
                await session_store.touch_session(conn, tenant.tenant_id, session.id, now=now_dt)
            else:
                # The policy is read by the INSERT itself: one statement for a new Session.
                created = await session_store.create_session_if_allowed(conn, tenant.tenant_id, client_id,
                                                                        assertion.user_id, now=now_dt)
                if created is None:
                    raise _refused_agent()
                session = created
            if d.seen.due((tenant.tenant_id, client_id)):
                await record_seen(conn, tenant.tenant_id, client_id, name=auth.client.metadata.client_name,
                                  logo=auth.client.metadata.logo_uri, now=now_dt)
            return await session_token_response(conn, d.keys, tenant, session, binding, now=now_dt)
