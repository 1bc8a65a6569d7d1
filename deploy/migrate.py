"""One-shot schema migration for container deployments (compose `migrate`, a Kubernetes Job).

Applies every pending migration of the packages in ``MIGRATED_PACKAGES`` to the database
at ``DATABASE_URL``, then exits. Safe to run while another copy runs: the runner holds a
PostgreSQL advisory lock. Exit status: 0 schema current, 1 migration error, 2 no
``DATABASE_URL``. The services never migrate on start-up; this job runs first.

    DATABASE_URL=postgresql://... python deploy/migrate.py
"""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg
from frontdoor_core.logging import configure_logging, get_logger

# THE list of packages whose migrations/*.sql make up the schema, for deployments.
# Add a package here when it gains tables, and install its library in
# deploy/migrate.Dockerfile; tests/unit/test_deploy_files.py fails until both are done.
# (discover() orders the files by version, so the order here does not matter.)
from frontdoor_core.migrations import (
    MIGRATED_PACKAGES,
    MigrationError,
    apply_migrations,
    discover,
)
from frontdoor_core.settings import ENV_NAMES


async def migrate(database_url: str) -> list[str]:
    """Apply what is missing; return the versions applied now."""
    conn = await asyncpg.connect(database_url, timeout=30)
    try:
        return await apply_migrations(conn, discover(MIGRATED_PACKAGES))
    finally:
        await conn.close()


def main(environ: dict[str, str] | None = None) -> int:
    env = dict(os.environ if environ is None else environ)
    configure_logging(level=env.get(ENV_NAMES["log_level"], "info"), fmt=env.get(ENV_NAMES["log_format"], "json"))
    log = get_logger("frontdoor.migrate")
    url = env.get(ENV_NAMES["database_url"], "")
    if not url:
        log.error("migrate.config_error", reason=f"{ENV_NAMES['database_url']} is not set")
        return 2
    try:
        applied = asyncio.run(migrate(url))
    except MigrationError as exc:
        log.error("migrate.failed", reason=str(exc))
        return 1
    log.info("migrate.done", applied=applied, packages=MIGRATED_PACKAGES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
