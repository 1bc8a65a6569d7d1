"""The OpenID Connect login connection's ``private_key_jwt`` signing key (RFC 7523, OIDC Core §9).

A connection whose ``token_endpoint_auth_method`` is ``private_key_jwt`` authenticates
Frontdoor at the IdP's token endpoint with a client assertion signed by a per-tenant
EC P-256 key. :func:`ensure_client_key` creates it on the first save of such a
connection (the private JWK a `Kek` blob, associated data ``oidc_client_key`` + tenant,
in ``oidc_client_keys``); :func:`public_client_jwks` is what ``{issuer}/oidc/jwks.json``
publishes for the admin to register at the IdP as the client's ``jwks_uri``;
:func:`load_client_key` reads the private key back for signing.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any

import asyncpg
from joserfc.jwk import ECKey

from .credentials.key_encryption import DecryptionError, Kek, Reencryption, row_aad
from .key_reencryption import reencrypt_tenant_keys

__all__ = ["ensure_client_key", "load_client_key", "public_client_jwks", "reencrypt_oidc_client_keys"]


def _aad(tenant_id: str) -> bytes:
    return row_aad("oidc_client_key", tenant_id)


async def ensure_client_key(conn: asyncpg.Connection, kek: Kek, tenant_id: str, *, now: datetime) -> bool:
    """Create the tenant's client key unless it has one; whether one was created."""
    kid = "fdoidc-" + secrets.token_urlsafe(12)
    key = ECKey.generate_key("P-256", parameters={"kid": kid, "use": "sig", "alg": "ES256"})
    blob = kek.encrypt(json.dumps(key.as_dict(private=True)).encode("ascii"), aad=_aad(tenant_id))
    created = await conn.fetchval(
        "INSERT INTO oidc_client_keys (tenant_id, kid, key_ciphertext, public_jwk, created_at)"
        " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id) DO NOTHING RETURNING true",
        tenant_id, kid, blob, dict(key.as_dict(private=False)), now)
    return bool(created)


async def load_client_key(conn: asyncpg.Connection, kek: Kek, tenant_id: str) -> ECKey | None:
    """The tenant's private client key, or None (none stored, or no configured KEK opens it)."""
    blob = await conn.fetchval("SELECT key_ciphertext FROM oidc_client_keys WHERE tenant_id = $1", tenant_id)
    if blob is None:
        return None
    try:
        return ECKey.import_key(json.loads(kek.decrypt(blob, aad=_aad(tenant_id))))
    except (DecryptionError, ValueError):
        return None


async def public_client_jwks(conn: asyncpg.Connection, tenant_id: str) -> dict[str, Any]:
    """``{"keys": [...]}``: the tenant's public client key, or no key."""
    raw = await conn.fetchval("SELECT public_jwk FROM oidc_client_keys WHERE tenant_id = $1", tenant_id)
    return {"keys": [] if raw is None else [json.loads(raw) if isinstance(raw, str) else dict(raw)]}


async def reencrypt_oidc_client_keys(pool: asyncpg.Pool, kek: Kek, *, batch: int = 100,
                                     dry_run: bool = False) -> Reencryption:
    """Re-encrypt every stored client key under the current KEK (KEK rotation; idempotent)."""
    return await reencrypt_tenant_keys(pool, kek, table="oidc_client_keys", column="key_ciphertext",
                                       label="oidc_client_key", aad=lambda r: _aad(r["tenant_id"]), batch=batch,
                                       dry_run=dry_run)
