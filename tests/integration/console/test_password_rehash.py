"""A successful sign-in replaces a hash made with older argon2 parameters; a failed one does not."""

from __future__ import annotations

from typing import Any

from argon2 import PasswordHasher, Type
from frontdoor_core.ids import new_id
from frontdoor_tenancy.credentials.password import needs_rehash
from litestar.testing import AsyncTestClient

from tests.conftest import unique
from tests.integration.conftest import STRONG_PASSWORD, TenantHandle
from tests.integration.console.test_admin_login import login

# What an older deployment might have used: cheaper parameters than today's.
_OLD = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1, hash_len=32, salt_len=16, type=Type.ID)


async def test_sign_in_rehashes_an_outdated_hash(console: AsyncTestClient[Any], tenant: TenantHandle, db: Any) -> None:
    email = f"{unique('old-')}@example.com"
    old_hash = _OLD.hash(STRONG_PASSWORD)
    assert needs_rehash(old_hash)
    admin_id = new_id("adm")
    await db.execute("INSERT INTO admins (tenant_id, id, email, password_hash, role) VALUES ($1, $2, $3, $4, 'viewer')",
                     tenant.id, admin_id, email, old_hash)
    stored = "SELECT password_hash FROM admins WHERE tenant_id = $1 AND id = $2"

    console.cookies.clear()
    assert (await login(console, email, "not the password at all")).status_code == 401
    assert await db.fetchval(stored, tenant.id, admin_id) == old_hash  # a wrong password changes nothing

    assert (await login(console, email, STRONG_PASSWORD)).status_code == 303
    new_hash = await db.fetchval(stored, tenant.id, admin_id)
    assert new_hash != old_hash and not needs_rehash(new_hash) and "m=65536,t=3,p=4" in new_hash
    console.cookies.clear()
    # and the same password still signs in, without another rewrite
    assert (await login(console, email, STRONG_PASSWORD)).status_code == 303
    assert await db.fetchval(stored, tenant.id, admin_id) == new_hash
    console.cookies.clear()
