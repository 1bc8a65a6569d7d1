"""The migration runner: timestamped raw SQL files, one history, applied under a lock.

Each library that owns tables ships ``migrations/*.sql`` inside its package, named
``YYYYMMDDHHMMSS_description.sql``. All libraries' files form one history ordered by
version. The runner is idempotent, serialises concurrent runners with a PostgreSQL
advisory lock, applies each file in its own transaction, and refuses to continue when
a file that was already applied has changed (its checksum differs): applied history is
forward-only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

__all__ = ["MIGRATED_PACKAGES", "Migration", "MigrationError", "apply_migrations", "discover"]

_NAME = re.compile(r"^(\d{14})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x66726F6E74  # "front"


class MigrationError(RuntimeError):
    """The migration history is inconsistent; nothing further was applied."""


@dataclass(frozen=True)
class Migration:
    """One SQL file of the history."""

    version: str
    name: str
    package: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


#: Every package that owns tables, by import name (order does not matter: versions are global).
MIGRATED_PACKAGES: list[str] = [
    "frontdoor_tenancy", "frontdoor_identity", "frontdoor_sessions", "frontdoor_webhooks", "frontdoor_operations",
    "frontdoor_conversations", "frontdoor_billing",
]


def discover(packages: list[str]) -> list[Migration]:
    """Collect the migrations of ``packages`` (import names), ordered by version."""
    found: dict[str, Migration] = {}
    for package in packages:
        root = resources.files(package) / "migrations"
        if not root.is_dir():
            continue
        for entry in root.iterdir():
            m = _NAME.match(entry.name)
            if m is None:
                if entry.name.endswith(".sql"):
                    raise MigrationError(f"badly named migration {package}/{entry.name}")
                continue
            mig = Migration(m.group(1), m.group(2), package, entry.read_text("utf-8"))
            if mig.version in found:
                raise MigrationError(f"two migrations share version {mig.version}")
            found[mig.version] = mig
    return [found[v] for v in sorted(found)]


async def apply_migrations(conn: asyncpg.Connection, migrations: list[Migration]) -> list[str]:
    """Apply what is missing; return the versions applied now.

    Raises:
        MigrationError: an applied migration changed, or the database knows a version
            this code does not (a newer deployment migrated it).
    """
    await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
    try:
        await conn.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    text PRIMARY KEY,
                name       text NOT NULL,
                package    text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        applied = {r["version"]: r["checksum"] for r in rows}
        known = {m.version for m in migrations}
        unknown = sorted(set(applied) - known)
        if unknown:
            raise MigrationError(f"database has migrations this code does not know: {unknown}")
        done: list[str] = []
        for mig in migrations:
            if mig.version in applied:
                if applied[mig.version] != mig.checksum:
                    raise MigrationError(
                        f"migration {mig.version}_{mig.name} was modified after it was applied"
                    )
                continue
            async with conn.transaction():
                await conn.execute(mig.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, package, checksum) VALUES ($1, $2, $3, $4)",
                    mig.version, mig.name, mig.package, mig.checksum,
                )
            done.append(mig.version)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
