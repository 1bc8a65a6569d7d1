"""Operator commands: ``python -m frontdoor_console.cli <command>``.

    migrate                      apply pending migrations
    rotate-signing-key SLUG      publish a new issuer key (signs after the publish lead)
      [--compromised]            the old key leaked: sign with the new one now and
                                 unpublish every other key at once
    rotate-oidc-client-key SLUG  publish a new private_key_jwt client key for the tenant's
      [--compromised]            OpenID Connect connection (signs after the publish lead)
    reencrypt-secrets            re-encrypt every secret stored under an older KEK with the
      [--dry-run] [--batch N]    current (first) FRONTDOOR_KEK key; idempotent

Configuration comes from the environment, as for the services.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from frontdoor_core.clock import utc_now
from frontdoor_core.db import create_pool, transaction
from frontdoor_core.errors import Conflict, NotFound
from frontdoor_core.migrations import (
    MIGRATED_PACKAGES,
    apply_migrations,
    discover,
)
from frontdoor_tenancy import audit, oidc_client_key, oidc_connection, signing_keys, tenants
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.credentials.key_encryption import Kek, Reencryption
from frontdoor_webhooks.endpoint_secrets import reencrypt_webhook_secrets

from .settings import load
from .simulator.identity import reencrypt_simulator_keys


async def _migrate() -> int:
    s = load()
    pool = await create_pool(s.database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            done = await apply_migrations(conn, discover(MIGRATED_PACKAGES))
    finally:
        await pool.close()
    print(f"applied {len(done)} migration(s): {', '.join(done) or 'none pending'}")
    return 0


async def _rotate(slug: str, immediate: bool) -> int:
    s = load()
    pool = await create_pool(s.database_url, min_size=1, max_size=1)
    try:
        async with transaction(pool) as conn:
            tenant = await tenants.tenant_by_slug(conn, slug)
            if tenant is None:
                print(f"no tenant with slug {slug!r}", file=sys.stderr)
                return 1
            kid, at = await signing_keys.rotate_signing_key(conn, tenant.id, Kek.from_env_value(s.kek), utc_now(),
                                                            publish_lead=s.key_publish_lead, compromised=immediate)
            await audit.record(conn, Actor(tenant_id=tenant.id, type="system"), "signing_key.rotated",
                               target_type="signing_key", target_id=kid,
                               details={"activates_at": at.isoformat(), "via": "cli", "compromised": immediate})
    finally:
        await pool.close()
    print(f"new key {kid} published; signs from {at.isoformat()}")
    return 0


async def _rotate_client_key(slug: str, immediate: bool) -> int:
    s = load()
    pool = await create_pool(s.database_url, min_size=1, max_size=1)
    try:
        async with transaction(pool) as conn:
            tenant = await tenants.tenant_by_slug(conn, slug)
            if tenant is None:
                print(f"no tenant with slug {slug!r}", file=sys.stderr)
                return 1
            try:
                done = await oidc_client_key.rotate_client_key(conn, Kek.from_env_value(s.kek), tenant.id,
                                                               now=utc_now(), publish_lead=s.key_publish_lead,
                                                               compromised=immediate)
            except (NotFound, Conflict) as exc:
                print(exc.detail, file=sys.stderr)
                return 1
            await audit.record(conn, Actor(tenant_id=tenant.id, type="system"), "oidc_client_key.rotated",
                               target_type="oidc_client_key", target_id=done.kid,
                               details={"activates_at": done.activates_at.isoformat(), "previous_kid": done.previous_kid,
                                        "via": "cli", "compromised": immediate})
    finally:
        await pool.close()
    print(f"new client key {done.kid} published at {{issuer}}/oidc/jwks.json; signs from {done.activates_at.isoformat()}")
    return 0


async def _reencrypt(dry_run: bool, batch: int) -> int:
    s = load()
    kek = Kek.from_env_value(s.kek)
    pool = await create_pool(s.database_url, min_size=1, max_size=1)
    try:
        # Every KEK-encrypted column, each re-encrypted by the library that owns it.
        results: list[Reencryption] = [
            await signing_keys.reencrypt_signing_keys(pool, kek, batch=batch, dry_run=dry_run),
            await reencrypt_webhook_secrets(pool, kek, batch=batch, dry_run=dry_run),
            await oidc_connection.reencrypt_oidc_client_secrets(pool, kek, batch=batch, dry_run=dry_run),
            await oidc_client_key.reencrypt_oidc_client_keys(pool, kek, batch=batch, dry_run=dry_run),
            await reencrypt_simulator_keys(pool, kek, batch=batch, dry_run=dry_run),
        ]
    finally:
        await pool.close()
    verb = "to re-encrypt" if dry_run else "re-encrypted"
    for r in results:
        print(f"{r.column}: {r.reencrypted} {verb}, {r.current} already under {kek.current_id}, "
              f"{len(r.unreadable)} unreadable")
        for row in r.unreadable:
            print(f"  unreadable under every configured KEK: {r.column} {row}", file=sys.stderr)
    if any(r.unreadable for r in results):
        print("some secrets open under no configured KEK: keep the key that encrypted them", file=sys.stderr)
        return 1
    print("dry run: nothing written" if dry_run else f"every stored secret is under KEK {kek.current_id}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frontdoor_console.cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply pending migrations")
    rot = sub.add_parser("rotate-signing-key", help="rotate a tenant's issuer signing key")
    rot.add_argument("slug")
    rot.add_argument("--compromised", action="store_true",
                     help="the old key leaked: sign with the new key now and unpublish the others at once")
    okey = sub.add_parser("rotate-oidc-client-key",
                          help="rotate the private_key_jwt client key of a tenant's OpenID Connect connection")
    okey.add_argument("slug")
    okey.add_argument("--compromised", action="store_true",
                      help="the old key leaked: sign with the new key now and unpublish the old one at once")
    enc = sub.add_parser("reencrypt-secrets",
                         help="re-encrypt stored secrets under the current KEK (after a KEK rotation)")
    enc.add_argument("--dry-run", action="store_true", help="count and check what would change, write nothing")
    enc.add_argument("--batch", type=int, default=100, help="rows per transaction (default 100)")
    args = parser.parse_args(argv)
    if args.command == "migrate":
        return asyncio.run(_migrate())
    if args.command == "reencrypt-secrets":
        if args.batch <= 0:
            parser.error("--batch must be positive")
        return asyncio.run(_reencrypt(args.dry_run, args.batch))
    if args.command == "rotate-oidc-client-key":
        return asyncio.run(_rotate_client_key(args.slug, args.compromised))
    return asyncio.run(_rotate(args.slug, args.compromised))


if __name__ == "__main__":
    raise SystemExit(main())
