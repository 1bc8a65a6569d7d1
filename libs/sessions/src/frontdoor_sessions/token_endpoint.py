"""What every grant at the token endpoint shares: the tenant, the outcome, refusals,
per-process dependencies, rate limits and one-round-trip replay claims.

Each grant lives in its own module (``session_grant``, ``device_grant``,
``refresh_grant``) and composes the checks it needs (`client_auth`, `token_binding`,
`token_response`); none subclasses another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import asyncpg
import msgspec
import redis.asyncio as aioredis
from frontdoor_core.errors import Unavailable
from frontdoor_core.rate_limit import hit, window_key
from frontdoor_core.redis_keys import shard
from frontdoor_identity import AgentDirectory
from frontdoor_protocol.errors import ProtocolError
from frontdoor_tenancy.issuer_settings import IssuerSettings

from .dpop_nonce import NonceSource
from .replay_cache import ReplayCache
from .signer_cache import IssuerKeys
from .throttle import Throttle
from .token_request import TokenRequest

__all__ = ["SKEW", "Grant", "GrantDeps", "GrantOutcome", "GrantRefused", "OneTimeValue", "TenantIssuer"]

SKEW = 60
"""Seconds of clock difference tolerated, added to every replay-cache TTL."""


class TenantIssuer(msgspec.Struct, frozen=True, kw_only=True):
    """The tenant whose endpoint was called."""

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


@dataclass(frozen=True, slots=True)
class OneTimeValue:
    """A value accepted once (a ``jti``) and the refusal when it was seen before."""

    namespace: str
    scope: str
    value: str
    ttl_s: int
    refusal: ProtocolError


class Grant(Protocol):
    """One grant type of the token endpoint."""

    async def issue(self, tenant: TenantIssuer, req: TokenRequest) -> GrantOutcome:
        """Validate, then issue; raise `GrantRefused` or `Unavailable`."""
        ...


@dataclass(frozen=True)
class AuthenticatedRequest:
    """A token-endpoint request past the network limit and client authentication."""

    now_dt: datetime
    now: int
    auth: Any


@dataclass
class GrantDeps:
    """Per-process dependencies every grant (and the revocation endpoint) uses."""

    pool: asyncpg.Pool
    redis: aioredis.Redis
    directory: AgentDirectory
    keys: IssuerKeys
    nonces: NonceSource
    clock: Callable[[], datetime]
    replay: ReplayCache = field(init=False)
    seen: Throttle = field(init=False)

    def __post_init__(self) -> None:
        self.replay = ReplayCache(self.redis)
        self.seen = Throttle(60.0)

    async def limit(self, key: str, limit: int, policy: str) -> None:
        """Count one request against a fixed one-minute window; refuse past ``limit``."""
        try:
            allowed, reset = await hit(self.redis, key, limit=limit, window_s=60)
        except Exception:
            raise Unavailable("rate_limiter_unavailable", "Temporarily unavailable; retry shortly.",
                              retry_after=5) from None
        if not allowed:
            raise _rate_limited(policy, limit, reset)

    async def limit_network(self, tenant: TenantIssuer, client_address: str) -> None:
        """The per-network limit on unverified requests, checked first by every grant."""
        await self.limit(f"tok:net:{shard(tenant.tenant_id)}:{client_address}",
                         tenant.settings.token_requests_per_network_per_minute, "token-network")

    async def limit_agent(self, tenant: TenantIssuer, client_id: str) -> None:
        """Sessions per agent, counted once the caller is authenticated."""
        await self.limit(_agent_key(tenant, client_id), _per_agent(tenant, client_id), "sessions-per-agent")

    async def authenticate(self, tenant: TenantIssuer, req: TokenRequest) -> AuthenticatedRequest:
        """What every grant does first: the clock, the per-network limit, client authentication."""
        from .client_auth import authenticate_client  # client_auth builds on this module

        now_dt = self.clock()
        now = int(now_dt.timestamp())
        await self.limit_network(tenant, req.client_address)
        auth = await authenticate_client(self.directory, tenant_id=tenant.tenant_id, issuer=tenant.issuer,
                                         client_id=req.client_id, assertion_type=req.client_assertion_type,
                                         assertion=req.client_assertion, now=now)
        return AuthenticatedRequest(now_dt=now_dt, now=now, auth=auth)

    async def claim_once_then_limit_agent(self, values: list[OneTimeValue], tenant: TenantIssuer,
                                          client_id: str) -> None:
        """`claim_once`, then `limit_agent`, in one Redis round trip (fail closed).

        Same refusals in the same order: the first replay, else ``rate_limited`` past the
        agent's Sessions per minute; a replay is not counted against the agent.
        """
        key, expire_s = window_key(_agent_key(tenant, client_id), 60)
        fresh, counted = await self.replay.claim_all_then_count(
            [(v.namespace, v.scope, v.value, v.ttl_s) for v in values], (key, expire_s))
        for value, first in zip(values, fresh, strict=True):
            if not first:
                raise value.refusal
        assert counted is not None  # every value was fresh, so the script counted
        count, ttl = counted
        limit = _per_agent(tenant, client_id)
        if count > limit:
            raise _rate_limited("sessions-per-agent", limit, max(ttl, 1))

    async def claim_once(self, values: list[OneTimeValue]) -> None:
        """Claim every value in one round trip (fail closed); refuse the first replay, in order."""
        fresh = await self.replay.claim_all([(v.namespace, v.scope, v.value, v.ttl_s) for v in values])
        for value, first in zip(values, fresh, strict=True):
            if not first:
                raise value.refusal


def _agent_key(tenant: TenantIssuer, client_id: str) -> str:
    return f"tok:agent:{shard(tenant.tenant_id)}:{client_id}"


def _per_agent(tenant: TenantIssuer, client_id: str) -> int:
    s = tenant.settings
    return s.agent_rate_overrides.get(client_id, s.sessions_per_agent_per_minute)


def _rate_limited(policy: str, limit: int, reset: int) -> GrantRefused:
    return GrantRefused(ProtocolError("rate_limited", "Too many requests; retry later."), {
        "Retry-After": str(reset),
        "RateLimit-Policy": f'"{policy}";q={limit};w=60',
        "RateLimit": f'"{policy}";r=0;t={reset}',
    })
