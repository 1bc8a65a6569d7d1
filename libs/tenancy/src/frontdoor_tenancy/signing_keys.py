"""A tenant's ES256 issuer keys: stored encrypted, published in its JWKS, rotated safely.

Rotation publishes the new key first and signs with it only after a lead time, so
verifiers that cached the JWKS find the new ``kid`` when they refetch; the retired key
stays published until everything it signed has expired.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg
from joserfc.jwk import ECKey

from .credentials.key_encryption import DecryptionError, Kek, Reencryption, row_aad
from .credentials.key_rotation import (
    SigningKeyRecord,
    current_signing_key,
    published_keys,
    rotate,
)
from .credentials.signing_key import generate_signing_key, load_private_key

__all__ = [
    "RETAIN_FOR",
    "ActiveSigner",
    "create_first_key",
    "jwks",
    "load_signer",
    "prune_retired_keys",
    "reencrypt_signing_keys",
    "rotate_signing_key",
]

# Longest lifetime of anything an issuer key signs (Session Tokens: at most 24 h) plus margin.
RETAIN_FOR = timedelta(hours=25)


class ActiveSigner:
    """The private key that signs for a tenant now, with its ``kid``."""

    __slots__ = ("key", "kid")

    def __init__(self, kid: str, key: ECKey) -> None:
        self.kid = kid
        self.key = key

    def __repr__(self) -> str:
        return f"ActiveSigner(kid={self.kid!r})"


async def _records(conn: asyncpg.Connection, tenant_id: str) -> list[SigningKeyRecord]:
    rows = await conn.fetch(
        "SELECT kid, created_at, activates_at, retired_at FROM signing_keys WHERE tenant_id = $1 ORDER BY created_at",
        tenant_id,
    )
    return [SigningKeyRecord(r["kid"], r["created_at"], r["activates_at"], r["retired_at"]) for r in rows]


async def _insert(
    conn: asyncpg.Connection, tenant_id: str, kek: Kek, record: SigningKeyRecord, *, pem: bytes, jwk: dict[str, str]
) -> None:
    blob = kek.encrypt(pem, aad=row_aad("signing_key", tenant_id, record.kid))
    await conn.execute(
        """
        INSERT INTO signing_keys (tenant_id, kid, alg, public_jwk, private_key_enc, created_at, activates_at)
        VALUES ($1, $2, 'ES256', $3, $4, $5, $6)
        """,
        tenant_id, record.kid, jwk, blob, record.created_at, record.activates_at,
    )


async def create_first_key(conn: asyncpg.Connection, tenant_id: str, kek: Kek, now: datetime) -> str:
    """Generate the tenant's first key, active at once; return its ``kid``."""
    material = generate_signing_key()
    plan = rotate([], now, material.kid)
    await _insert(conn, tenant_id, kek, plan.new_key, pem=material.private_pem, jwk=material.public_jwk)
    return material.kid


async def rotate_signing_key(
    conn: asyncpg.Connection, tenant_id: str, kek: Kek, now: datetime, *, publish_lead: timedelta,
    compromised: bool = False,
) -> tuple[str, datetime]:
    """Add a new key (published now, signing after ``publish_lead``); return (kid, activates_at).

    ``compromised``: the old keys may be in an attacker's hands. The new key signs at once
    and every other key leaves the JWKS now, so nothing they signed verifies any more
    (Sessions then renew with the new key; Account Tokens are opaque and unaffected).

    Locks the tenant's key rows so concurrent rotations serialise.
    """
    if compromised:
        publish_lead = timedelta(0)
    await conn.execute("SELECT 1 FROM signing_keys WHERE tenant_id = $1 FOR UPDATE", tenant_id)
    records = await _records(conn, tenant_id)
    material = generate_signing_key()
    plan = rotate(records, now, material.kid, publish_lead)
    for old in plan.retired:
        await conn.execute(
            "UPDATE signing_keys SET retired_at = $3 WHERE tenant_id = $1 AND kid = $2",
            tenant_id, old.kid, old.retired_at,
        )
    await _insert(conn, tenant_id, kek, plan.new_key, pem=material.private_pem, jwk=material.public_jwk)
    if compromised:
        # Retired long enough ago that no retention window keeps them published.
        await conn.execute(
            "UPDATE signing_keys SET retired_at = $3 WHERE tenant_id = $1 AND kid <> $2",
            tenant_id, material.kid, now - RETAIN_FOR - timedelta(seconds=1),
        )
    return material.kid, plan.new_key.activates_at


async def jwks(conn: asyncpg.Connection, tenant_id: str, now: datetime) -> dict[str, Any]:
    """The JWKS document: every key published at ``now`` (public parts only)."""
    records = await _records(conn, tenant_id)
    keep = {r.kid for r in published_keys(records, now, RETAIN_FOR)}
    rows = await conn.fetch(
        "SELECT kid, public_jwk FROM signing_keys WHERE tenant_id = $1 ORDER BY created_at DESC", tenant_id
    )
    return {"keys": [r["public_jwk"] for r in rows if r["kid"] in keep]}


async def load_signer(conn: asyncpg.Connection, tenant_id: str, kek: Kek, now: datetime) -> ActiveSigner:
    """Decrypt the key that signs at ``now``."""
    record = current_signing_key(await _records(conn, tenant_id), now)
    blob = await conn.fetchval(
        "SELECT private_key_enc FROM signing_keys WHERE tenant_id = $1 AND kid = $2", tenant_id, record.kid
    )
    pem = kek.decrypt(blob, aad=row_aad("signing_key", tenant_id, record.kid))
    return ActiveSigner(record.kid, load_private_key(pem))


async def prune_retired_keys(conn: asyncpg.Connection, now: datetime) -> int:
    """Delete keys no JWKS publishes any more (retired longer than `RETAIN_FOR`); return how many.

    The worker's job, across tenants. A key that signs is never retired, so a tenant always
    keeps its signing key; the encrypted private halves of old keys stop lingering.
    """
    result = await conn.execute(
        "DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND retired_at < $1", now - RETAIN_FOR
    )
    return int(result.split()[-1])


async def reencrypt_signing_keys(pool: asyncpg.Pool, kek: Kek, *, batch: int = 100,
                                 dry_run: bool = False) -> Reencryption:
    """Re-encrypt every tenant's private halves under the current KEK (KEK rotation).

    Rows already under the current key are not touched, so the pass is idempotent and can
    be stopped and run again. Each batch of ``batch`` rows is one transaction that locks
    its rows (a concurrent rotation waits for it, and the other way round). A blob that
    opens under no configured key is left as it is and reported. ``dry_run`` decrypts
    but writes nothing.
    """
    if batch <= 0:
        raise ValueError("batch must be positive")
    current = kek.current_id_bytes
    already = await pool.fetchval(
        "SELECT count(*) FROM signing_keys WHERE substring(private_key_enc from 2 for 8) = $1", current
    )
    done, unreadable = 0, []
    after = ("", "")
    while True:
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(
                "SELECT tenant_id, kid, private_key_enc FROM signing_keys"
                " WHERE (tenant_id, kid) > ($1, $2) AND substring(private_key_enc from 2 for 8) <> $3"
                " ORDER BY tenant_id, kid LIMIT $4 FOR UPDATE",
                after[0], after[1], current, batch,
            )
            updates = []
            for r in rows:
                try:
                    blob = kek.reencrypt(r["private_key_enc"], aad=row_aad("signing_key", r["tenant_id"], r["kid"]))
                except DecryptionError:
                    unreadable.append(f"{r['tenant_id']}/{r['kid']}")
                    continue
                updates.append((r["tenant_id"], r["kid"], blob))
            if updates and not dry_run:
                await conn.executemany(
                    "UPDATE signing_keys SET private_key_enc = $3 WHERE tenant_id = $1 AND kid = $2", updates
                )
            done += len(updates)
        if len(rows) < batch:
            break
        after = (rows[-1]["tenant_id"], rows[-1]["kid"])
    return Reencryption(column="signing_keys.private_key_enc", reencrypted=done, current=int(already),
                        unreadable=tuple(unreadable))
