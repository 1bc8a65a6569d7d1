"""Per-process dependencies of the issuer, stored on ``app.state.ctx``."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from frontdoor_core.runtime import Runtime
from frontdoor_core.settings import Settings
from frontdoor_sessions import IntrospectionCache, IssuerKeys, SessionGrant, TenantIssuer
from frontdoor_tenancy import issuer_settings, tenants
from frontdoor_tenancy.issuer_profile import issuer_urls

__all__ = ["IssuerContext"]

_TENANT_TTL = 5.0


@dataclass
class IssuerContext:
    """Everything handlers need beyond the request."""

    runtime: Runtime
    keys: IssuerKeys
    grant: SessionGrant
    directory: Any
    devices: Any = None
    kek: Any = None
    fetcher: Any = None
    _tenants: dict[str, tuple[float, TenantIssuer | None]] = field(default_factory=dict)
    _introspection_cache: IntrospectionCache | None = None

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    @property
    def pool(self) -> Any:
        return self.runtime.pool

    @property
    def redis(self) -> Any:
        return self.runtime.redis

    @property
    def introspection_cache(self) -> IntrospectionCache:
        """Session state for introspection in Redis (versioned by the tenant's event head)."""
        if self._introspection_cache is None:
            self._introspection_cache = IntrospectionCache(self.redis)
        return self._introspection_cache

    def now(self) -> datetime:
        return self.runtime.clock()

    async def tenant(self, slug: str) -> TenantIssuer | None:
        """The tenant at ``slug`` with its settings, cached for a few seconds per process."""
        hit = self._tenants.get(slug)
        if hit and time.monotonic() - hit[0] < _TENANT_TTL:
            return hit[1]
        async with self.pool.acquire() as conn:
            t = await tenants.tenant_by_slug(conn, slug)
            found = None
            if t is not None:
                stored = await issuer_settings.get_settings(conn, t.id)
                urls = issuer_urls(self.settings.issuer_base_url, slug)
                found = TenantIssuer(tenant_id=t.id, issuer=urls.issuer, token_endpoint=urls.token_endpoint,
                                     settings=stored.settings)
        if len(self._tenants) > 10_000:
            self._tenants.clear()
        self._tenants[slug] = (time.monotonic(), found)
        return found


def nonce_secret(settings: Settings) -> bytes:
    """The DPoP nonce secret shared by every replica, derived from the KEK."""
    return hashlib.sha256(b"frontdoor/dpop-nonce-secret\x00" + settings.kek.encode()).digest()
