"""Endpoint signing secrets at rest: KEK-encrypted, rotated with an overlap.

A secret is stored only as a `Kek` blob whose associated data names its row
(``webhook_secret``, tenant, endpoint, secret ID), so a blob copied to another row or
tenant does not decrypt. The current secret has ``expires_at`` NULL; rotating gives the
previous one ``expires_at = now + overlap``, and until then deliveries carry a signature
under each, so a receiver can switch secrets at its own pace.

An endpoint using the asymmetric scheme (``v1a``) also has Ed25519 keys in the same
table (``algorithm = 'ed25519'``): the ``whsk_`` private key encrypted like a secret,
the ``whpk_`` public key in the clear. They rotate the same way, one current key per
algorithm. After a KEK rotation, `reencrypt_webhook_secrets` moves every stored blob
(secrets and private keys alike) to the current KEK.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

import asyncpg
import msgspec
from frontdoor_core.ids import new_id
from frontdoor_tenancy.credentials import DecryptionError, Kek, Reencryption, row_aad

from .signing import new_secret, new_signing_key

__all__ = [
    "SIGNING_ORDER",
    "PublicKey",
    "add_secret",
    "add_signing_key",
    "drop_signing_keys",
    "public_keys",
    "open_secrets",
    "reencrypt_webhook_secrets",
    "rotate_secret_rows",
    "rotate_signing_key_rows",
    "signing_secrets",
]

Algorithm = Literal["hmac-sha256", "ed25519"]


class PublicKey(msgspec.Struct, frozen=True, kw_only=True):
    """An Ed25519 public key receivers verify ``v1a`` signatures with.

    Attributes:
        public_key: ``whpk_`` and the base64 of the raw 32-byte key.
        expires_at: None for the current key; else the end of its rotation overlap.
    """

    public_key: str
    created_at: datetime
    expires_at: datetime | None


def _aad(tenant_id: str, endpoint_id: str, secret_id: str) -> bytes:
    return row_aad("webhook_secret", tenant_id, endpoint_id, secret_id)


async def _store(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek, now: datetime, *,
                 secret: str, algorithm: Algorithm, public_key: str | None) -> None:
    secret_id = new_id("whs")
    blob = kek.encrypt(secret.encode("ascii"), aad=_aad(tenant_id, endpoint_id, secret_id))
    await conn.execute(
        "INSERT INTO webhook_secrets (tenant_id, id, endpoint_id, secret_ciphertext, created_at, algorithm, public_key)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        tenant_id, secret_id, endpoint_id, blob, now, algorithm, public_key,
    )


async def add_secret(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek, now: datetime) -> str:
    """Store a new current secret for an endpoint that has none; return it (shown once)."""
    secret = new_secret()
    await _store(conn, tenant_id, endpoint_id, kek, now, secret=secret, algorithm="hmac-sha256", public_key=None)
    return secret


async def add_signing_key(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek,
                          now: datetime) -> str:
    """Store a new current Ed25519 key for an endpoint that has none; return its ``whpk_`` public key."""
    private, public = new_signing_key()
    await _store(conn, tenant_id, endpoint_id, kek, now, secret=private, algorithm="ed25519", public_key=public)
    return public


async def _retire(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, *, algorithm: Algorithm,
                  now: datetime, overlap: timedelta) -> None:
    if overlap < timedelta(0):
        raise ValueError("overlap cannot be negative")
    await conn.execute(
        "DELETE FROM webhook_secrets WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at <= $3",
        tenant_id, endpoint_id, now,
    )
    await conn.execute(
        "UPDATE webhook_secrets SET expires_at = $3"
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND expires_at IS NULL AND algorithm = $4",
        tenant_id, endpoint_id, now + overlap, algorithm,
    )


async def rotate_secret_rows(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek, *, now: datetime,
                             overlap: timedelta) -> str:
    """Retire the current secret after ``overlap`` and store a new one; return the new one.

    Secrets already expired are deleted on the way. Run in the caller's transaction.
    """
    await _retire(conn, tenant_id, endpoint_id, algorithm="hmac-sha256", now=now, overlap=overlap)
    return await add_secret(conn, tenant_id, endpoint_id, kek, now)


async def rotate_signing_key_rows(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek, *,
                                  now: datetime, overlap: timedelta) -> str:
    """Retire the current Ed25519 key (if any) after ``overlap`` and store a new one; return its public key."""
    await _retire(conn, tenant_id, endpoint_id, algorithm="ed25519", now=now, overlap=overlap)
    return await add_signing_key(conn, tenant_id, endpoint_id, kek, now)


async def drop_signing_keys(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str) -> None:
    """Delete every Ed25519 key of an endpoint (it goes back to HMAC signatures only)."""
    await conn.execute(
        "DELETE FROM webhook_secrets WHERE tenant_id = $1 AND endpoint_id = $2 AND algorithm = 'ed25519'",
        tenant_id, endpoint_id,
    )


async def public_keys(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, now: datetime) -> list[PublicKey]:
    """The endpoint's Ed25519 public keys valid at ``now``, the current one first."""
    rows = await conn.fetch(
        "SELECT public_key, created_at, expires_at FROM webhook_secrets"
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND algorithm = 'ed25519'"
        " AND (expires_at IS NULL OR expires_at > $3) ORDER BY expires_at DESC NULLS FIRST, id DESC",
        tenant_id, endpoint_id, now,
    )
    return [PublicKey(**dict(r)) for r in rows]


async def signing_secrets(conn: asyncpg.Connection, tenant_id: str, endpoint_id: str, kek: Kek,
                          now: datetime) -> list[str]:
    """Every secret valid at ``now``: the ``whsec_`` ones, then the ``whsk_`` ones (v1a), current first.

    Raises:
        frontdoor_tenancy.credentials.DecryptionError: A blob does not open under the
            configured KEK (never logged with its content).
    """
    rows = await conn.fetch(
        "SELECT id, secret_ciphertext FROM webhook_secrets"  # noqa: S608  (SIGNING_ORDER is a constant)
        " WHERE tenant_id = $1 AND endpoint_id = $2 AND (expires_at IS NULL OR expires_at > $3)"
        " ORDER BY " + SIGNING_ORDER,
        tenant_id, endpoint_id, now,
    )
    return open_secrets([(r["id"], r["secret_ciphertext"]) for r in rows], tenant_id, endpoint_id, kek)


SIGNING_ORDER = "algorithm DESC, expires_at DESC NULLS FIRST, id DESC"
"""The order of `signing_secrets`: HMAC (v1) entries first, current first (for a statement reading them itself)."""


def open_secrets(rows: list[tuple[str, bytes]], tenant_id: str, endpoint_id: str, kek: Kek) -> list[str]:
    """Decrypt ``(id, secret_ciphertext)`` rows read in `SIGNING_ORDER` (as `signing_secrets` returns them).

    Raises:
        frontdoor_tenancy.credentials.DecryptionError: A blob does not open under the
            configured KEK (never logged with its content).
    """
    return [kek.decrypt(blob, aad=_aad(tenant_id, endpoint_id, secret_id)).decode("ascii") for secret_id, blob in rows]


async def reencrypt_webhook_secrets(pool: asyncpg.Pool, kek: Kek, *, batch: int = 100,
                                    dry_run: bool = False) -> Reencryption:
    """Re-encrypt every endpoint's secrets and Ed25519 private keys under the current KEK.

    All tenants (KEK rotation). Each blob keeps its associated data (tenant, endpoint,
    secret ID). Rows already under the current key are not touched, so the pass is
    idempotent and can be stopped and run again; each batch of ``batch`` rows is one
    transaction that locks its rows. A blob that opens under no configured key is left
    as it is and reported. ``dry_run`` decrypts but writes nothing.
    """
    if batch <= 0:
        raise ValueError("batch must be positive")
    current = kek.current_id_bytes
    already = await pool.fetchval(
        "SELECT count(*) FROM webhook_secrets WHERE substring(secret_ciphertext from 2 for 8) = $1", current
    )
    done, unreadable = 0, []
    after = ("", "")
    while True:
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "SELECT tenant_id, id, endpoint_id, secret_ciphertext FROM webhook_secrets"
                " WHERE (tenant_id, id) > ($1, $2) AND substring(secret_ciphertext from 2 for 8) <> $3"
                " ORDER BY tenant_id, id LIMIT $4 FOR UPDATE",
                after[0], after[1], current, batch,
            )
            updates = []
            for r in rows:
                try:
                    blob = kek.reencrypt(r["secret_ciphertext"], aad=_aad(r["tenant_id"], r["endpoint_id"], r["id"]))
                except DecryptionError:
                    unreadable.append(f"{r['tenant_id']}/{r['id']}")
                    continue
                updates.append((r["tenant_id"], r["id"], blob))
            if updates and not dry_run:
                await conn.executemany(
                    "UPDATE webhook_secrets SET secret_ciphertext = $3 WHERE tenant_id = $1 AND id = $2", updates
                )
            done += len(updates)
        if len(rows) < batch:
            break
        after = (rows[-1]["tenant_id"], rows[-1]["id"])
    return Reencryption(column="webhook_secrets.secret_ciphertext", reencrypted=done, current=int(already),
                        unreadable=tuple(unreadable))
