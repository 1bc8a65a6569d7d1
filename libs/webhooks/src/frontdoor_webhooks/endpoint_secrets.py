"""Endpoint signing secrets at rest: KEK-encrypted, rotated with an overlap.

A secret is stored only as a `Kek` blob whose associated data names its row
(``webhook_secret``, tenant, endpoint, secret ID), so a blob copied to another row or
tenant does not decrypt. The current secret has ``expires_at`` NULL; rotating gives the
previous one ``expires_at = now + overlap``, and until then deliveries carry a signature
under each, so a receiver can switch secrets at its own pace.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import asyncpg
from frontdoor_core.ids import new_id
from frontdoor_tenancy.credentials import Kek, row_aad

from .signing import new_secret

__all__ = ["add_secret", "rotate_secret_rows", "signing_secrets"]


def _aad(tenant_id: str, endpoint_id: str, secret_id: str) -> bytes:
    return row_aad("webhook_secret", tenant_id, endpoint_id, secret_id)


async def add_secret(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek, now: datetime) -> str:
    """Store a new current secret for an endpoint that has none; return it (shown once)."""
    secret = new_secret()
    secret_id = new_id("whs")
    blob = kek.encrypt(secret.encode("ascii"), aad=_aad(tenant_id, endpoint_id, secret_id))
    await conn.execute(
        "INSERT INTO webhook_secrets (tenant_id, id, endpoint_id, secret_ciphertext, created_at)"
        " VALUES ($1, $2, $3, $4, $5)",
        tenant_id, secret_id, endpoint_id, blob, now,
    )
    return secret


async def rotate_secret_rows(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek, *, now: datetime,
                             overlap: timedelta) -> str:
    """Retire the current secret after ``overlap`` and store a new one; return the new one.

    Secrets already expired are deleted on the way. Run in the caller's transaction.
    """
    if overlap < timedelta(0):
        raise ValueError("overlap cannot be negative")
    await conn.execute(
        "DELETE FROM webhook_secrets WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at <= $3",
        tenant_id, endpoint_id, now,
    )
    await conn.execute(
        "UPDATE webhook_secrets SET expires_at = $3"
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at IS NULL",
        tenant_id, endpoint_id, now + overlap,
    )
    return await add_secret(conn, tenant_id, endpoint_id, kek, now)


async def signing_secrets(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek,
                          now: datetime) -> list[str]:
    """Every secret valid at ``now``, newest first (the current one leads).

    Raises:
        frontdoor_tenancy.credentials.DecryptionError: A blob does not open under the
            configured KEK (never logged with its content).
    """
    rows = await conn.fetch(
        "SELECT id, secret_ciphertext FROM webhook_secrets"
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND (expires_at IS NULL OR expires_at > $3)"
        " ORDER BY expires_at DESC NULLS FIRST, id DESC",
        tenant_id, endpoint_id, now,
    )
    return [kek.decrypt(r["secret_ciphertext"], aad=_aad(tenant_id, endpoint_id, r["id"])).decode("ascii")
            for r in rows]
