"""The simulator agent's identity: one per tenant, a P-256 key generated once and stored
KEK-encrypted, published as a Client ID Metadata Document and a JWKS on the console.

The ``client_id`` is ``{console_base_url}/simulator/{slug}/agent.json``: every list that
shows agents can tell the simulator by that shape (`is_simulator`), and the document
itself says so (``software_id``). Before a run acts under a ``client_id``, it is recorded
in ``simulator_client_ids`` (`register_client_id`): the funnel and billing's metering
leave those out (a slug or the console's URL may change, so the record keeps every one).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import asyncpg
from frontdoor_tenancy.credentials.key_encryption import Kek, Reencryption, row_aad
from frontdoor_tenancy.key_reencryption import reencrypt_tenant_keys
from joserfc.jwk import ECKey

__all__ = ["SOFTWARE_ID", "SimulatorIdentity", "client_id_for", "is_simulator", "load_identity",
           "reencrypt_simulator_keys", "register_client_id"]

SOFTWARE_ID: Final = "frontdoor-agent-simulator"
_PURPOSE: Final = "simulator_agent_key"


def client_id_for(console_base_url: str, slug: str) -> str:
    """The simulator agent's ``client_id`` (its CIMD URL) for the tenant ``slug``."""
    return f"{console_base_url}/simulator/{slug}/agent.json"


def is_simulator(console_base_url: str, client_id: str) -> bool:
    """True for a ``client_id`` of Frontdoor's agent simulator (any tenant's)."""
    prefix = f"{console_base_url}/simulator/"
    if not (client_id.startswith(prefix) and client_id.endswith("/agent.json")):
        return False
    slug = client_id[len(prefix):-len("/agent.json")]
    return bool(slug) and "/" not in slug


async def register_client_id(conn: asyncpg.Connection, tenant_id: str, client_id: str, *, now: datetime) -> None:
    """Record that the tenant's simulator acts under ``client_id`` (before its first request)."""
    await conn.execute("INSERT INTO simulator_client_ids (tenant_id, client_id, registered_at) VALUES ($1, $2, $3)"
                       " ON CONFLICT (tenant_id, client_id) DO NOTHING", tenant_id, client_id, now)


class SimulatorIdentity:
    """The tenant's simulator agent: its key and the documents it publishes."""

    def __init__(self, console_base_url: str, slug: str, key: ECKey, kid: str) -> None:
        self.client_id = client_id_for(console_base_url, slug)
        self.jwks_uri = f"{console_base_url}/simulator/{slug}/jwks.json"
        self.redirect_uri = f"{console_base_url}/simulator/{slug}/callback"  # Direct Sign-In's return
        self.key = key
        self.kid = kid

    def metadata(self) -> dict[str, Any]:
        """The Client ID Metadata Document (no secret in it)."""
        return {
            "client_id": self.client_id,
            "client_name": "Frontdoor agent simulator",
            "software_id": SOFTWARE_ID,
            "jwks_uri": self.jwks_uri,
            "redirect_uris": [self.redirect_uri],
            "token_endpoint_auth_method": "private_key_jwt",
            # OPS-2-01: companies return operations only to agents that list the extension.
            "extensions": {"operations": {"version": "1"}},
        }

    def jwks(self) -> dict[str, Any]:
        """The public key set (never the private part)."""
        public = self.key.as_dict(private=False)
        public.update({"kid": self.kid, "use": "sig", "alg": "ES256"})
        return {"keys": [public]}


async def load_identity(conn: asyncpg.Connection, kek: Kek, tenant_id: str, slug: str, *,
                        console_base_url: str, now: datetime) -> SimulatorIdentity:
    """The tenant's simulator identity, created on first use (a race keeps the first row)."""
    row = await conn.fetchrow("SELECT kid, key_ciphertext FROM simulator_agents WHERE tenant_id = $1", tenant_id)
    if row is None:
        key = ECKey.generate_key("P-256", parameters={"use": "sig", "alg": "ES256"})
        kid = key.thumbprint()
        blob = kek.encrypt(key.as_pem(private=True), aad=row_aad(_PURPOSE, tenant_id, kid))
        await conn.execute(
            "INSERT INTO simulator_agents (tenant_id, kid, key_ciphertext, created_at) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (tenant_id) DO NOTHING", tenant_id, kid, blob, now)
        row = await conn.fetchrow("SELECT kid, key_ciphertext FROM simulator_agents WHERE tenant_id = $1", tenant_id)
    assert row is not None
    pem = kek.decrypt(bytes(row["key_ciphertext"]), aad=row_aad(_PURPOSE, tenant_id, row["kid"]))
    return SimulatorIdentity(console_base_url, slug, ECKey.import_key(pem), row["kid"])


async def reencrypt_simulator_keys(pool: asyncpg.Pool, kek: Kek, *, batch: int = 100,
                                   dry_run: bool = False) -> Reencryption:
    """Re-encrypt every simulator agent key under the current KEK (``reencrypt-secrets``)."""
    return await reencrypt_tenant_keys(pool, kek, table="simulator_agents", column="key_ciphertext",
                                       label="simulator_agent_key", columns=("kid",),
                                       aad=lambda r: row_aad(_PURPOSE, r["tenant_id"], r["kid"]), batch=batch,
                                       dry_run=dry_run)
