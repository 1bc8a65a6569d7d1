"""Re-encrypting one KEK-encrypted column keyed by tenant under the current KEK (KEK rotation).

The per-tenant key tables (one row per tenant: the OIDC client key, the agent simulator's
key) share this walk: batches in ``tenant_id`` order, each one transaction locking its rows,
only blobs not already under the current key, idempotent; a blob no configured key opens is
reported as ``tenant/label``, never changed. The table and column names are the caller's
constants, never input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import asyncpg

from .credentials.key_encryption import DecryptionError, Kek, Reencryption

__all__ = ["reencrypt_tenant_keys"]

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


async def reencrypt_tenant_keys(pool: asyncpg.Pool, kek: Kek, *, table: str, column: str, label: str,
                                aad: Callable[[Any], bytes], columns: tuple[str, ...] = (), batch: int = 100,
                                dry_run: bool = False) -> Reencryption:
    """Move every blob of ``table.column`` (one row per ``tenant_id``) to the current KEK.

    Args:
        pool: The database.
        kek: The configured keys; the first is current.
        table: The table (a constant of the caller).
        column: The ``bytea`` column holding the blob.
        label: How an unreadable row is named in the report (``tenant/label``).
        aad: The associated data of a row (it gets ``tenant_id``, ``column`` and ``columns``).
        columns: Further columns ``aad`` needs.
        batch: Rows per transaction.
        dry_run: Count, change nothing.
    """
    if batch <= 0:
        raise ValueError("batch must be positive")
    if not all(_IDENTIFIER.fullmatch(name) for name in (table, column, *columns)):
        raise ValueError("table and column names are plain identifiers")
    current = kek.current_id_bytes
    extra = "".join(f", {c}" for c in columns)
    already = await pool.fetchval(
        f"SELECT count(*) FROM {table} WHERE substring({column} from 2 for 8) = $1",  # noqa: S608 - constant names
        current)
    done, unreadable, after = 0, [], ""
    while True:
        async with pool.acquire() as conn, conn.transaction():
            sql = (f"SELECT tenant_id, {column}{extra} FROM {table} WHERE tenant_id > $1"  # noqa: S608 - constant names
                   f" AND substring({column} from 2 for 8) <> $2 ORDER BY tenant_id LIMIT $3 FOR UPDATE")
            rows = await conn.fetch(sql, after, current, batch)
            updates = []
            for r in rows:
                try:
                    updates.append((r["tenant_id"], kek.reencrypt(bytes(r[column]), aad=aad(r))))
                except DecryptionError:
                    unreadable.append(f"{r['tenant_id']}/{label}")
            if updates and not dry_run:
                await conn.executemany(f"UPDATE {table} SET {column} = $2 WHERE tenant_id = $1",  # noqa: S608
                                       updates)
            done += len(updates)
        if len(rows) < batch:
            break
        after = rows[-1]["tenant_id"]
    return Reencryption(column=f"{table}.{column}", reencrypted=done, current=int(already),
                        unreadable=tuple(unreadable))
