"""The identity tables on the worker's database.

The root fixture migrates only the packages it lists; until frontdoor_identity is among
them this applies its migration too. The runner is idempotent, and every package already
recorded is included so a history applied by another suite is never "unknown".
"""

from __future__ import annotations

import pytest
from frontdoor_core.migrations import apply_migrations, discover
from frontdoor_core.runtime import Runtime


@pytest.fixture(scope="session")
async def identity_schema(runtime: Runtime) -> None:
    async with runtime.pool.acquire() as conn:
        rows = await conn.fetch("SELECT DISTINCT package FROM schema_migrations")
        recorded = {row["package"] for row in rows if row["package"].startswith("frontdoor_")}
        packages = sorted(recorded | {"frontdoor_tenancy", "frontdoor_identity"})
        await apply_migrations(conn, discover(packages))


@pytest.fixture(autouse=True)
def _identity_schema(identity_schema: None) -> None:
    return identity_schema
