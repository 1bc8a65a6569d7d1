"""Per-process caches of each tenant's signing key and published keys.

Decrypting the private key and parsing the JWKS on every token request would dominate
the grant's cost; both change only on rotation, which publishes ahead of use, so a short
cache is safe: a new key starts signing here at most ``ttl`` after it activates, and a
retired key stays published for a day.
"""

from __future__ import annotations

import time
from datetime import datetime

import asyncpg
from frontdoor_tenancy.credentials.key_encryption import Kek
from frontdoor_tenancy.signing_keys import ActiveSigner, jwks, load_signer
from joserfc.jwk import KeySet

__all__ = ["IssuerKeys"]


class IssuerKeys:
    """Signer and verification keys per tenant, cached for ``ttl`` seconds."""

    def __init__(self, kek: Kek, *, ttl: float = 30.0) -> None:
        self._kek = kek
        self._ttl = ttl
        self._signers: dict[str, tuple[float, ActiveSigner]] = {}
        self._keysets: dict[str, tuple[float, KeySet]] = {}

    async def signer(self, conn: asyncpg.Connection, tenant_id: str, now: datetime) -> ActiveSigner:
        hit = self._signers.get(tenant_id)
        if hit and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        signer = await load_signer(conn, tenant_id, self._kek, now)
        self._signers[tenant_id] = (time.monotonic(), signer)
        return signer

    def cached(self, tenant_id: str) -> KeySet | None:
        """The tenant's verification keys if this process holds them fresh (no connection needed)."""
        hit = self._keysets.get(tenant_id)
        return hit[1] if hit and time.monotonic() - hit[0] < self._ttl else None

    async def keyset(self, conn: asyncpg.Connection, tenant_id: str, now: datetime, *, refresh: bool = False) -> KeySet:
        hit = self._keysets.get(tenant_id)
        if hit and not refresh and time.monotonic() - hit[0] < self._ttl:
            return hit[1]
        keys = KeySet.import_key_set(await jwks(conn, tenant_id, now))  # type: ignore[arg-type]
        self._keysets[tenant_id] = (time.monotonic(), keys)
        return keys
