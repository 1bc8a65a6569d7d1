"""KEK rotation: ``reencrypt-secrets`` moves every KEK-encrypted column to the current key.

Secrets are written under KEK A, the configuration becomes ``B,A``, the command runs, and
then everything opens with B alone. Re-encryption is global (every tenant), so these tests
run against a database of their own: the shared one keeps using the suite's KEK.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from frontdoor_core.db import create_pool
from frontdoor_core.settings import Settings
from frontdoor_tenancy import signing_keys, tenants
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials import DecryptionError, Kek, generate_kek_value, row_aad
from frontdoor_webhooks import create_endpoint, reencrypt_webhook_secrets, signing_secrets
from frontdoor_webhooks.endpoint_secrets import rotate_secret_rows

from tests.integration.conftest import STRONG_PASSWORD
from tests.support.databases import own_database
from tests.support.servers import Servers

NOW = datetime.now(UTC)
A, B, C = generate_kek_value(), generate_kek_value(), generate_kek_value()


@dataclass
class Fresh:
    url: str
    pool: asyncpg.Pool


@pytest.fixture
async def fresh(servers: Servers) -> AsyncIterator[Fresh]:
    """A new database on the worker's server, migrated, dropped afterwards."""
    async with own_database(servers, "fd_reencrypt") as url:
        pool = await create_pool(url, min_size=1, max_size=4)
        try:
            yield Fresh(url, pool)
        finally:
            await pool.close()


def run_reencrypt(settings: Settings, database_url: str, kek: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": settings.redis_url, "FRONTDOOR_KEK": kek,
           "FRONTDOOR_ENV": "test"}
    return subprocess.run([sys.executable, "-m", "frontdoor_console.cli", "reencrypt-secrets", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


async def _tenant(pool: asyncpg.Pool, kek: Kek, slug: str) -> str:
    """A tenant with two signing keys and a v1a endpoint with two HMAC secrets and an Ed25519 key."""
    made = await tenants.sign_up(pool, tenants.SignUp(email=f"{slug}@example.com", password=STRONG_PASSWORD,
                                                      organization_name=f"Org {slug}", slug=slug), kek=kek, now=NOW)
    tenant_id = made.tenant.id
    async with pool.acquire() as conn, conn.transaction():
        await signing_keys.rotate_signing_key(conn, tenant_id, kek, NOW, publish_lead=timedelta(minutes=10))
        created = await create_endpoint(conn, Actor(tenant_id=tenant_id, type="system"),
                                        url="https://hooks.example.com/h", kek=kek, now=NOW,
                                        signing_scheme="v1a", allow_insecure=True)
        await rotate_secret_rows(conn, tenant_id, created.endpoint.id, kek, now=NOW, overlap=timedelta(days=1))
    return tenant_id


async def _plaintexts(pool: asyncpg.Pool, kek: Kek) -> dict[str, bytes]:
    """Every stored secret, opened with ``kek`` and the AAD its owner binds it to."""
    out: dict[str, bytes] = {}
    for r in await pool.fetch("SELECT tenant_id, kid, private_key_enc FROM signing_keys"):
        out[f"sk/{r['kid']}"] = kek.decrypt(r["private_key_enc"], aad=row_aad("signing_key", r["tenant_id"], r["kid"]))
    for r in await pool.fetch("SELECT tenant_id, id, endpoint_id, secret_ciphertext FROM webhook_secrets"):
        out[f"wh/{r['id']}"] = kek.decrypt(r["secret_ciphertext"], aad=row_aad(
            "webhook_secret", r["tenant_id"], r["endpoint_id"], r["id"]))
    return out


async def _kek_ids(pool: asyncpg.Pool) -> set[str]:
    rows = await pool.fetch("SELECT substring(private_key_enc from 2 for 8) AS k FROM signing_keys"
                            " UNION ALL SELECT substring(secret_ciphertext from 2 for 8) FROM webhook_secrets")
    return {bytes(r["k"]).hex() for r in rows}


async def test_rotate_to_b_then_reencrypt_then_b_alone_opens_everything(settings: Settings, fresh: Fresh) -> None:
    kek_a, kek_b = Kek.from_env_value(A), Kek.from_env_value(B)
    first = await _tenant(fresh.pool, kek_a, "reenc-one")
    await _tenant(fresh.pool, kek_a, "reenc-two")
    before = await _plaintexts(fresh.pool, kek_a)
    assert len(before) == 2 * (2 + 3)
    blobs = await fresh.pool.fetch("SELECT private_key_enc FROM signing_keys ORDER BY kid")

    dry = run_reencrypt(settings, fresh.url, f"{B},{A}", "--dry-run", "--batch", "3")
    assert dry.returncode == 0, dry.stderr
    assert "signing_keys.private_key_enc: 4 to re-encrypt, 0 already under" in dry.stdout
    assert "webhook_secrets.secret_ciphertext: 6 to re-encrypt" in dry.stdout and "nothing written" in dry.stdout
    assert await fresh.pool.fetch("SELECT private_key_enc FROM signing_keys ORDER BY kid") == blobs
    assert await _kek_ids(fresh.pool) == {kek_a.current_id}

    done = run_reencrypt(settings, fresh.url, f"{B},{A}", "--batch", "3")
    assert done.returncode == 0, done.stderr
    assert "signing_keys.private_key_enc: 4 re-encrypted" in done.stdout
    assert "webhook_secrets.secret_ciphertext: 6 re-encrypted" in done.stdout
    assert f"every stored secret is under KEK {kek_b.current_id}" in done.stdout
    assert A not in done.stdout + done.stderr and B not in done.stdout + done.stderr
    assert await _kek_ids(fresh.pool) == {kek_b.current_id}

    # B alone opens everything, through the owners' own read paths too; A alone no longer does.
    assert await _plaintexts(fresh.pool, kek_b) == before
    async with fresh.pool.acquire() as conn:
        signer = await signing_keys.load_signer(conn, first, kek_b, NOW)
        assert signer.kid
        endpoint_id = await conn.fetchval("SELECT id FROM webhook_endpoints WHERE tenant_id = $1", first)
        opened = await signing_secrets(conn, first, endpoint_id, kek_b, NOW)
        assert [s.split("_")[0] for s in opened] == ["whsec", "whsec", "whsk"]
        with pytest.raises(DecryptionError) as refused:
            await signing_keys.load_signer(conn, first, kek_a, NOW)
        assert refused.value.reason == "unknown_kek"

    again = run_reencrypt(settings, fresh.url, f"{B},{A}")
    assert again.returncode == 0, again.stderr
    assert "signing_keys.private_key_enc: 0 re-encrypted, 4 already under" in again.stdout
    assert "webhook_secrets.secret_ciphertext: 0 re-encrypted, 6 already under" in again.stdout


async def test_unreadable_blobs_are_reported_and_left_while_the_rest_moves(settings: Settings,
                                                                           fresh: Fresh) -> None:
    kek_a, kek_ba = Kek.from_env_value(A), Kek.from_env_value(f"{B},{A}")
    lost = await _tenant(fresh.pool, Kek.from_env_value(C), "reenc-lost")  # under a key no longer configured
    kept = await _tenant(fresh.pool, kek_a, "reenc-kept")
    # A blob moved to another row does not open there (its AAD names its own row).
    async with fresh.pool.acquire() as conn:
        kids = [r["kid"] for r in await conn.fetch("SELECT kid FROM signing_keys WHERE tenant_id = $1 ORDER BY kid",
                                                    kept)]
        await conn.execute("UPDATE signing_keys SET private_key_enc = (SELECT private_key_enc FROM signing_keys"
                           " WHERE tenant_id = $1 AND kid = $2) WHERE tenant_id = $1 AND kid = $3",
                           kept, kids[0], kids[1])

    keys = await signing_keys.reencrypt_signing_keys(fresh.pool, kek_ba, batch=1)
    assert (keys.reencrypted, keys.current) == (1, 0)
    assert sorted(keys.unreadable) == sorted([f"{kept}/{kids[1]}"] + [
        f"{lost}/{r['kid']}" for r in await fresh.pool.fetch("SELECT kid FROM signing_keys WHERE tenant_id = $1",
                                                            lost)])
    hooks = await reencrypt_webhook_secrets(fresh.pool, kek_ba, batch=2)
    assert (hooks.reencrypted, hooks.current, len(hooks.unreadable)) == (3, 0, 3)
    assert all(u.startswith(f"{lost}/whs_") for u in hooks.unreadable)
    assert (await reencrypt_webhook_secrets(fresh.pool, kek_ba)).reencrypted == 0  # idempotent
    with pytest.raises(ValueError, match="batch"):
        await reencrypt_webhook_secrets(fresh.pool, kek_ba, batch=0)

    refused = run_reencrypt(settings, fresh.url, f"{B},{A}")
    assert refused.returncode == 1
    assert "signing_keys.private_key_enc: 0 re-encrypted, 1 already under" in refused.stdout
    assert f"signing_keys.private_key_enc {lost}/" in refused.stderr
    assert "keep the key that encrypted them" in refused.stderr
