"""Per-process dependencies of the ledger, stored on ``app.state.ctx``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec
from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_operations.settled import OutcomeWaiters, publish_settled
from frontdoor_protocol import VerifiedSignatures
from frontdoor_sessions import IssuerKeys
from frontdoor_sessions.replay_cache import ReplayCache
from frontdoor_tenancy import tenants
from frontdoor_tenancy.issuer_profile import issuer_urls

__all__ = ["LedgerContext", "LedgerTenant"]

_TENANT_TTL = 5.0


class LedgerTenant(msgspec.Struct, frozen=True, kw_only=True):
    """The tenant at a ledger path: its ID, issuer identifier and public endpoint."""

    tenant_id: str
    slug: str
    issuer: str
    endpoint: str


@dataclass
class LedgerContext:
    """Everything handlers need beyond the request."""

    runtime: Runtime
    keys: IssuerKeys
    replay: ReplayCache
    directory: Any
    waiters: OutcomeWaiters
    agent_keys: Any = None  # PAP 1.0 identity keys (frontdoor_identity.DelegatedKeyDirectory)
    delegated_callers: Any = None  # PAP 1.0 requests (frontdoor_sessions.DelegatedCallers)
    performer: Any = None
    # Session Tokens whose signature verified against the key set `keys` holds (its claims
    # and the DPoP proof are checked on every request): one ES256 verify per request, not two.
    signatures: VerifiedSignatures = field(default_factory=VerifiedSignatures)
    _tenants: dict[str, tuple[float, LedgerTenant | None]] = field(default_factory=dict)

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def pool(self) -> Any:
        return self.runtime.pool

    def now(self) -> datetime:
        return self.runtime.clock()

    async def settled(self, operation_id: str) -> None:
        """An outcome was recorded here: wake this process's waiters and tell the others."""
        self.waiters.wake(operation_id)
        await publish_settled(self.runtime.redis, operation_id)

    async def tenant(self, slug: str) -> LedgerTenant | None:
        """The tenant at ``slug``, cached for a few seconds per process."""
        hit = self._tenants.get(slug)
        if hit and time.monotonic() - hit[0] < _TENANT_TTL:
            return hit[1]
        found = None
        if 0 < len(slug) <= 63:
            async with self.pool.acquire() as conn:
                t = await tenants.tenant_by_slug(conn, slug)
            if t is not None:
                found = LedgerTenant(tenant_id=t.id, slug=slug,
                                     issuer=issuer_urls(self.settings.issuer_base_url, slug).issuer,
                                     endpoint=f"{self.settings.ledger_base_url}/{slug}/operations")
        if len(self._tenants) > 10_000:
            self._tenants.clear()
        self._tenants[slug] = (time.monotonic(), found)
        return found
