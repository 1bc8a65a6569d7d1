"""A database of a test's own on the worker's PostgreSQL server, dropped afterwards.

For what the shared migrated database cannot show because every test writes there at
once: the migrations themselves, a table's whole contents (retention, partitions), the
plans of a seeded schema, a key rotation over every row.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from frontdoor_core.migrations import MIGRATED_PACKAGES, apply_migrations, discover
from frontdoor_devstack.scale_seed import ScalePlan, seed, sign_up_template

from tests.support.servers import Servers, fresh_database

__all__ = ["connected", "own_database", "seed_scale"]


@asynccontextmanager
async def connected(url: str) -> AsyncIterator[asyncpg.Connection]:
    """One connection to ``url`` for the block."""
    conn = await asyncpg.connect(url)
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def own_database(servers: Servers, prefix: str, *, migrated: bool = True) -> AsyncIterator[str]:
    """A new database ``{prefix}_{random}`` (with every migration applied unless ``migrated`` is false); its URL.

    Dropped when the block ends, its connections closed by force.
    """
    name = f"{prefix}_{secrets.token_hex(6)}"
    url = await fresh_database(servers.database_url, name)
    try:
        if migrated:
            async with connected(url) as conn:
                await apply_migrations(conn, discover(MIGRATED_PACKAGES))
        yield url
    finally:
        admin = await asyncpg.connect(servers.database_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def seed_scale(url: str, plan: ScalePlan, kek_value: str) -> None:
    """`frontdoor_devstack.scale_seed`'s rows for ``plan``, copied from a tenant signed up for real."""
    template = await sign_up_template(url, kek_value)
    async with connected(url) as conn:
        await seed(conn, plan, template_tenant_id=template, kek_value=kek_value, log=lambda _: None)
