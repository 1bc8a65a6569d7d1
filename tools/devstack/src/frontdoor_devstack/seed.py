"""Migrations for every library, and the demo tenant ``make run`` prints."""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from frontdoor_core.migrations import apply_migrations, discover
from frontdoor_core.settings import Settings

MIGRATED_PACKAGES = ["frontdoor_tenancy", "frontdoor_identity", "frontdoor_sessions"]
DEMO_SLUG = "demo"


async def apply_all_migrations(database_url: str) -> list[str]:
    """Bring the schema up to date (safe to run concurrently: advisory lock)."""
    conn = await asyncpg.connect(database_url)
    try:
        return await apply_migrations(conn, discover(MIGRATED_PACKAGES))
    finally:
        await conn.close()


async def seed_demo(settings: Settings, data_dir: Path) -> dict[str, Any]:
    """Create the demo tenant once; its credentials are kept in the data directory (0600)."""
    from frontdoor_core.db import create_pool
    from frontdoor_tenancy import tenants
    from frontdoor_tenancy.credentials.key_encryption import Kek

    file = data_dir / "demo-credentials.json"
    if file.exists():
        saved: dict[str, Any] = json.loads(file.read_text())
        saved["file"] = str(file)
        return saved
    password = secrets.token_urlsafe(18)
    from frontdoor_core.errors import Conflict

    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        result = await tenants.sign_up(
            pool,
            tenants.SignUp(email="admin@demo.frontdoor.dev", password=password,
                           organization_name="Demo Company", slug=DEMO_SLUG),
            kek=Kek.from_env_value(os.environ.get("FRONTDOOR_KEK") or settings.kek or (data_dir / "kek").read_text().strip()),
            now=datetime.now(UTC),
        )
    except Conflict:
        # The database already has a demo tenant but this data directory has no record of
        # its secrets (e.g. DATABASE_URL points at a shared server): say so, do not reset it.
        return {"slug": DEMO_SLUG, "email": "admin@demo.frontdoor.dev", "password": "(set on first run)",
                "api_key": "(shown on first run only; create one with POST /api/v1/api-keys)", "file": str(file)}
    finally:
        await pool.close()
    creds = {"slug": DEMO_SLUG, "email": "admin@demo.frontdoor.dev", "password": password,
             "api_key": result.api_key.api_key, "tenant_id": result.tenant.id}
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(creds, f, indent=2)
    creds["file"] = str(file)
    return creds
