"""The jwt-bearer Session grant (PAP §4.2, §4.3): validate, then issue.

Order matters for cost and for what an unauthenticated caller can learn:

1. per-network rate limit on unverified requests;
2. client authentication (``private_key_jwt``, PAP-4.1-05) with keys from the agent's
   verified metadata (an unknown ``kid`` refetches the JWKS once);
3. the target resource (an MCP server the tenant lists, RFC 8707) and its token type;
4. the DPoP proof (exactly one, no ``ath``, optional server nonce);
5. the Session assertion (PAP-4.2-07/08);
6. one-time ``jti`` claims in Redis for the client assertion, the Session assertion and
   the DPoP proof, in one pipelined round trip (fail closed when Redis is down);
7. the per-agent Session rate limit (only now: the caller is authenticated);
8. the tenant's agent policy, read on every request (a blocked agent is
   ``unauthorized_client``), then the Session: new, or renewed when ``session_id`` names
   a live Session of the same agent and user (else ``invalid_session``, PAP-4.2-04);
9. a Session Token signed by the tenant's issuer key.

Cost: three Redis round trips and two SQL statements per new Session (the agent's
"last seen" is written at most once a minute per process).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.rate_limit import hit
from frontdoor_identity import (
    AgentDirectory,
    ClientResolutionError,
    ResolvedClient,
    get_agent_policy,
    is_allowed,
    record_seen,
)
from frontdoor_protocol.client_assertion import verify_client_assertion
from frontdoor_protocol.dpop_proof import verify_dpop_proof
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.jws_verification import UnknownKeyId
from frontdoor_protocol.session_assertion import verify_session_assertion
from frontdoor_protocol.session_token import Confirmation, SessionTokenClaims, mint_session_token
from frontdoor_tenancy.issuer_settings import IssuerSettings
from joserfc.jwk import KeySet
from joserfc.jws import extract_compact

from . import session_store
from .dpop_nonce import NonceSource
from .replay_cache import ReplayCache
from .signer_cache import IssuerKeys
from .throttle import Throttle
from .token_request import CLIENT_ASSERTION_TYPE, JWT_BEARER, TokenRequest

__all__ = ["GrantOutcome", "GrantRefused", "SessionGrant", "TenantIssuer"]

_SKEW = 60


class TenantIssuer(msgspec.Struct, frozen=True, kw_only=True):
    """The tenant whose token endpoint was called."""

    tenant_id: str
    issuer: str
    token_endpoint: str
    settings: IssuerSettings


class GrantOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The token response body and the headers to send with it."""

    body: dict[str, Any]
    headers: dict[str, str]


class GrantRefused(Exception):
    """A refusal to send: the protocol error and any headers that go with it."""

    def __init__(self, error: ProtocolError, headers: dict[str, str] | None = None) -> None:
        super().__init__(error.code)
        self.error = error
        self.headers = headers or {}


def _err(code: str, description: str) -> ProtocolError:
    return ProtocolError(code, description)


def _unverified_iss(assertion: str) -> str | None:
    try:
        claims = msgspec.json.decode(extract_compact(assertion.encode()).payload)
    except Exception:
        return None
    iss = claims.get("iss") if isinstance(claims, dict) else None
    return iss if isinstance(iss, str) else None


class SessionGrant:
    """Issues Sessions for every tenant; one instance per process."""

    def __init__(self, *, pool: asyncpg.Pool, redis: aioredis.Redis, directory: AgentDirectory, keys: IssuerKeys,
                 nonces: NonceSource, clock: Callable[[], datetime]) -> None:
        self._pool = pool
        self._redis = redis
        self._directory = directory
        self._keys = keys
        self._nonces = nonces
        self._replay = ReplayCache(redis)
        self._clock = clock
        self._seen = Throttle(60.0)

    async def _limit(self, key: str, limit: int, policy: str) -> None:
        try:
            allowed, reset = await hit(self._redis, key, limit=limit, window_s=60)
        except Exception:
            raise Unavailable("rate_limiter_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
        if not allowed:
            raise GrantRefused(_err("rate_limited", "Too many requests; retry later."), {
                "Retry-After": str(reset),
                "RateLimit-Policy": f'"{policy}";q={limit};w=60',
                "RateLimit": f'"{policy}";r=0;t={reset}',
            })

    async def _verify_with_refresh(self, client: ResolvedClient, verify: Callable[[KeySet], Any]) -> Any:
        try:
            return verify(client.keys)
        except UnknownKeyId:
            fresh = await self._directory.refresh_keys(client.metadata.client_id)
            if fresh is None:
                raise
            return verify(fresh)

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
        now_dt = self._clock()
        now = int(now_dt.timestamp())
        s = tenant.settings
        await self._limit(f"tok:net:{tenant.tenant_id}:{req.client_address}", s.token_requests_per_network_per_minute,
                          "token-network")
        if req.grant_type != JWT_BEARER:
            if req.grant_type is None:
                raise _err("invalid_request", "grant_type is required.")
            raise _err("unsupported_grant_type", "This grant type is not supported here.")

        # --- client authentication (PAP-4.1-05)
        if req.client_assertion_type != CLIENT_ASSERTION_TYPE or not req.client_assertion:
            raise _err("invalid_client", "Authenticate with private_key_jwt (client_assertion).")
        client_id = req.client_id or _unverified_iss(req.client_assertion)
        if not client_id:
            raise _err("invalid_client", "The client assertion does not name a client.")
        try:
            client = await self._directory.get_client(client_id)
        except ClientResolutionError:
            raise _err("invalid_client", "The client's metadata could not be used.") from None
        assertion = await self._verify_with_refresh(client, lambda ks: verify_client_assertion(
            req.client_assertion or "", client_id=client_id, issuer=tenant.issuer, keys=ks, now=now))

        # --- target resource (RFC 8707; PAP §4.3 MCP)
        bearer = False
        audience = tenant.issuer
        if req.resource is not None:
            api = next((a for a in s.apis if a.type == "mcp" and a.url == req.resource), None)
            if api is None:
                raise _err("invalid_target", "The resource is not one of this company's MCP servers.")
            audience = api.url
            bearer = not api.supports_dpop

        # --- DPoP (PAP §4.3, RFC 9449)
        jkt: str | None = None
        extra_headers: dict[str, str] = {}
        proof_claim: tuple[str, int] | None = None
        if not bearer:
            if len(req.dpop) != 1:
                raise _err("invalid_dpop_proof", "Send exactly one DPoP proof.")
            accepted = self._nonces.accepted(tenant.tenant_id, now) if s.dpop_nonce_required else None
            try:
                proof = verify_dpop_proof(req.dpop[0], method="POST", url=tenant.token_endpoint, now=now,
                                          access_token=None, nonce=accepted, require_nonce=s.dpop_nonce_required)
            except ProtocolError as exc:
                if exc.code == "use_dpop_nonce":
                    raise GrantRefused(exc, {"DPoP-Nonce": self._nonces.current(tenant.tenant_id, now)}) from None
                raise
            jkt = proof.jkt
            proof_claim = (proof.jti, max(proof.accept_until - now, 1) + _SKEW)
            if s.dpop_nonce_required:
                extra_headers["DPoP-Nonce"] = self._nonces.current(tenant.tenant_id, now)

        # --- the Session assertion (PAP-4.2-07, PAP-4.2-08)
        if not req.assertion:
            raise _err("invalid_request", "assertion is required.")
        session_assertion = await self._verify_with_refresh(client, lambda ks: verify_session_assertion(
            req.assertion or "", client_id=client_id, issuer=tenant.issuer, keys=ks, now=now))

        # --- one-time use, shared by every replica (PAP-4.2-09, RFC 9449 §11.1), one round trip
        scope = f"{tenant.tenant_id}\x00{client_id}"
        claims_wanted = [("client-assertion", scope, assertion.jti, assertion.exp - now + _SKEW),
                         ("session-assertion", scope, session_assertion.jti, session_assertion.exp - now + _SKEW)]
        if proof_claim is not None:
            claims_wanted.append(("dpop", f"{tenant.tenant_id}\x00{jkt}", proof_claim[0], proof_claim[1]))
        fresh = await self._replay.claim_all(claims_wanted)
        if not fresh[0]:
            raise _err("invalid_client", "The client assertion was already used.")
        if not fresh[1]:
            raise _err("invalid_grant", "The assertion was already used.")
        if proof_claim is not None and not fresh[2]:
            raise _err("invalid_dpop_proof", "The DPoP proof was already used.")

        # --- Sessions per agent, counted once the caller is authenticated
        per_agent = s.agent_rate_overrides.get(client_id, s.sessions_per_agent_per_minute)
        await self._limit(f"tok:agent:{tenant.tenant_id}:{client_id}", per_agent, "sessions-per-agent")

        # One connection, no explicit transaction: each write below is a single statement.
        async with self._pool.acquire() as conn:
            # The policy is read on every request, never cached: a block applies at once.
            policy = await get_agent_policy(conn, tenant.tenant_id, client_id=client_id)
            if not is_allowed(policy, client_id):
                raise _err("unauthorized_client", "This agent may not start Sessions here.")
            if req.session_id is not None:
                session = await session_store.find_session(conn, tenant.tenant_id, req.session_id)
                if (session is None or not session.live or session.client_id != client_id
                        or session.user_id != session_assertion.user_id):
                    raise _err("invalid_session", "The session_id does not name a live Session of this user.")
                await session_store.touch_session(conn, tenant.tenant_id, session.id, now=now_dt)
            else:
                session = await session_store.create_session(conn, tenant.tenant_id, client_id,
                                                             session_assertion.user_id, now=now_dt)
            if self._seen.due((tenant.tenant_id, client_id)):
                await record_seen(conn, tenant.tenant_id, client_id, name=client.metadata.client_name,
                                  logo=client.metadata.logo_uri, now=now_dt)
            signer = await self._keys.signer(conn, tenant.tenant_id, now_dt)

        lifetime = s.session_lifetime_s
        claims = SessionTokenClaims(
            iss=tenant.issuer, sub=session_assertion.user_id, aud=audience, client_id=client_id, sid=session.id,
            jti=secrets.token_urlsafe(16), iat=now, exp=now + lifetime,
            cnf=Confirmation(jkt=jkt) if jkt else None, resource=req.resource,
        )
        token = mint_session_token(claims, signer.key, signer.kid)
        body: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer" if bearer else "DPoP",
            "expires_in": lifetime,
            "session_id": session.id,
            "signed_in": session.signed_in,
        }
        if session.signed_in and session.scope:
            body["scope"] = session.scope
        return GrantOutcome(body=body, headers=extra_headers)

