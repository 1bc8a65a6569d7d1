"""The OpenID Connect login connection's client secret, KEK-encrypted apart from the settings.

A tenant whose ``login`` is ``oidc`` signs its users in at its own identity provider; the
client secret Frontdoor presents at the IdP's token endpoint must be read back, so it is
stored as a `Kek` blob (associated data ``oidc_client_secret`` + tenant) in
``oidc_client_secrets``, never in the issuer settings the management API returns whole.

`store_login_secret` is the one write path (the management API and the dashboard): it
takes the write-only ``login.client_secret`` out of the settings to be saved, stores it,
keeps the stored one when none is given, and drops it when the connection stops being
``oidc``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import asyncpg
import msgspec
from frontdoor_core.errors import Invalid

from .credentials.key_encryption import DecryptionError, Kek, Reencryption, row_aad
from .issuer_settings import IssuerSettings
from .key_reencryption import reencrypt_tenant_keys
from .oidc_client_key import ensure_client_key

__all__ = [
    "SecretChange",
    "has_client_secret",
    "load_client_secret",
    "reencrypt_oidc_client_secrets",
    "store_login_secret",
]

SecretChange = Literal["set", "kept", "removed", "none"]
"""What a settings write did to the stored secret (for the audit log; never the secret)."""


def _aad(tenant_id: str) -> bytes:
    return row_aad("oidc_client_secret", tenant_id)


async def has_client_secret(conn: asyncpg.Connection, tenant_id: str) -> bool:
    """Whether the tenant has a stored OIDC client secret (what the API may say about it)."""
    return bool(await conn.fetchval("SELECT true FROM oidc_client_secrets WHERE tenant_id = $1", tenant_id))


async def load_client_secret(conn: asyncpg.Connection, kek: Kek, tenant_id: str) -> str | None:
    """The tenant's OIDC client secret in clear, or None (none stored, or it no longer opens).

    A blob that no configured KEK opens reads as no secret: the sign-in then fails at the
    IdP like a wrong secret would, and nothing about the blob is echoed.
    """
    blob = await conn.fetchval("SELECT secret_ciphertext FROM oidc_client_secrets WHERE tenant_id = $1", tenant_id)
    if blob is None:
        return None
    try:
        return kek.decrypt(blob, aad=_aad(tenant_id)).decode("ascii")
    except (DecryptionError, UnicodeDecodeError):
        return None


async def store_login_secret(conn: asyncpg.Connection, kek: Kek, tenant_id: str, settings: IssuerSettings, *,
                             now: datetime) -> tuple[IssuerSettings, SecretChange]:
    """Store the settings' write-only client secret; return the settings without it.

    Run in the transaction that saves the settings.

    Args:
        conn: The transaction's connection.
        kek: Encrypts the secret.
        tenant_id: The tenant.
        settings: Validated settings, ``login.client_secret`` possibly set.
        now: The write's time.

    Returns:
        The settings to store (``login.client_secret`` None) and what happened to the secret.

    Raises:
        Invalid: ``login.client_secret``: an ``oidc`` connection without a secret, given
            or stored.
    """
    login = settings.login
    if login is None or login.type != "oidc":
        gone = await conn.fetchval("DELETE FROM oidc_client_secrets WHERE tenant_id = $1 RETURNING true", tenant_id)
        return settings, "removed" if gone else "none"
    if login.token_endpoint_auth_method == "private_key_jwt":
        await ensure_client_key(conn, kek, tenant_id, now=now)  # signs the client assertion; no secret needed
        if login.client_secret is None:
            return settings, "kept" if await has_client_secret(conn, tenant_id) else "none"
    if login.client_secret is None:
        if not await has_client_secret(conn, tenant_id):
            raise Invalid("invalid_settings", "The issuer settings are not valid.",
                          fields={"login.client_secret": "an oidc connection needs the client secret the IdP issued"})
        return settings, "kept"
    blob = kek.encrypt(login.client_secret.encode("ascii"), aad=_aad(tenant_id))
    await conn.execute(
        "INSERT INTO oidc_client_secrets (tenant_id, secret_ciphertext, updated_at) VALUES ($1, $2, $3)"
        " ON CONFLICT (tenant_id) DO UPDATE SET secret_ciphertext = EXCLUDED.secret_ciphertext,"
        " updated_at = EXCLUDED.updated_at",
        tenant_id, blob, now,
    )
    return msgspec.structs.replace(settings, login=msgspec.structs.replace(login, client_secret=None)), "set"


async def reencrypt_oidc_client_secrets(pool: asyncpg.Pool, kek: Kek, *, batch: int = 100,
                                        dry_run: bool = False) -> Reencryption:
    """Re-encrypt every stored OIDC client secret under the current KEK (KEK rotation; idempotent)."""
    return await reencrypt_tenant_keys(pool, kek, table="oidc_client_secrets", column="secret_ciphertext",
                                       label="oidc", aad=lambda r: _aad(r["tenant_id"]), batch=batch,
                                       dry_run=dry_run)
