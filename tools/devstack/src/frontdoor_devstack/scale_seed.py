"""Bulk data for scale tests: N tenants with their domains, agents, Sessions, operations and
webhook history, written by PostgreSQL itself (``INSERT ... SELECT generate_series``), not
through per-row HTTP (issue #15 §3, docs/scaling.md).

    python -m frontdoor_devstack.scale_seed --tenants 10000 --sessions 1000000 \\
        --operations 1000000 --attempts 10000000            (DATABASE_URL, FRONTDOOR_KEK)

Every generated tenant is usable by the hot paths: it has an admin (the template's password
hash), the template tenant's issuer settings, a verified domain, an open agent policy, an
ES256 signing key that the issuer can decrypt and sign with, agents, a webhook endpoint and
an operation kind. Generating one P-256 key per tenant costs little, but the seed shares one
key pair across all of them to stay fast: each tenant gets its own ``signing_keys`` row
encrypted under the KEK with that row's associated data (so ``load_signer`` works), with the
same key material and ``kid``. Never do that outside a test database.

The template tenant is signed up through ``frontdoor_tenancy.tenants.sign_up`` (or named with
``--template``): its settings and password hash are copied. Rows are spread over the tenants
round robin and over the last ``--days`` days. Seeded webhook messages are finished
(delivered, or exhausted for one in 50), so a running deliverer has nothing to send; seeded
operations are final except one in 20, which is ``proposed`` with an expiry far ahead.
Foreign-key triggers are skipped while loading (``session_replication_role = replica``, a
superuser setting; the rows are consistent by construction) and every table is ANALYZEd after.
IDs carry ``--prefix`` so a second seed into the same database does not collide.
"""

# ruff: noqa: S608  (the SQL interpolates only integers and ScalePlan.prefix, which __post_init__ checks)
from __future__ import annotations

import argparse
import asyncio
import os
import re
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

__all__ = ["ScalePlan", "main", "seed", "sign_up_template"]

SEEDED_TABLES = ("tenants", "admins", "issuer_settings", "signing_keys", "domains", "agent_policies", "agents",
                 "webhook_endpoints", "operation_kinds", "pap_sessions", "operations", "operation_revisions",
                 "webhook_messages", "webhook_attempts", "session_events", "audit_log")


@dataclass(frozen=True)
class ScalePlan:
    """How much to write. Per-tenant rows are spread round robin over ``tenants``."""

    tenants: int
    sessions: int
    operations: int
    attempts: int
    messages: int = 0  # 0: one message per five attempts (at least one)
    session_events: int = 0  # 0: as many as sessions
    agents_per_tenant: int = 5
    audit_per_tenant: int = 20
    days: int = 60
    prefix: str = "s"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]{1,8}", self.prefix):
            raise ValueError("prefix: 1 to 8 lowercase letters or digits")
        if min(self.tenants, self.agents_per_tenant) < 1 or min(self.sessions, self.operations, self.attempts) < 0:
            raise ValueError("tenants and agents_per_tenant must be positive, counts not negative")

    @property
    def message_count(self) -> int:
        return self.messages or max(self.attempts // 5, 1)

    @property
    def event_count(self) -> int:
        return self.session_events or self.sessions


def _statements(p: ScalePlan) -> list[tuple[str, str]]:
    """(table, SQL) in dependency order. $1: the template tenant's ID."""
    px = p.prefix
    tenant = f"'ten_{px}' || lpad(t::text, 8, '0')"

    def owner(i: str) -> str:  # the tenant a row number belongs to (round robin)
        return f"'ten_{px}' || lpad((1 + ({i} - 1) % {p.tenants})::text, 8, '0')"

    def when(i: str, n: int) -> str:  # spread over the last `days` days, newest last
        return f"now() - make_interval(secs => {p.days} * 86400.0 * ({n} - {i}) / {max(n, 1)})"

    agent = f"'https://agent' || (1 + (i / {p.tenants}) % {p.agents_per_tenant}) || '.scale.test/agent.json'"
    endpoint = f"'whe_{px}' || lpad((1 + (i - 1) % {p.tenants})::text, 8, '0')"
    m = p.message_count
    return [
        ("tenants", f"INSERT INTO tenants (id, slug, organization_name, created_at)"
                    f" SELECT {tenant}, 'scale-{px}-' || t, 'Scale Company ' || t, now() - interval '400 days'"
                    f" FROM generate_series(1, {p.tenants}) t"),
        ("admins", f"INSERT INTO admins (tenant_id, id, email, password_hash, role)"
                   f" SELECT {tenant}, 'adm_{px}' || t, 'admin@scale-{px}-' || t || '.scale.test',"
                   f" (SELECT password_hash FROM admins WHERE tenant_id = $1 ORDER BY created_at LIMIT 1), 'owner'"
                   f" FROM generate_series(1, {p.tenants}) t"),
        ("issuer_settings", f"INSERT INTO issuer_settings (tenant_id, settings)"
                            f" SELECT {tenant}, (SELECT settings FROM issuer_settings WHERE tenant_id = $1)"
                            f" FROM generate_series(1, {p.tenants}) t"),
        ("domains", f"INSERT INTO domains (tenant_id, id, domain, status, challenge_token, verified_at, last_seen_at,"
                    f" last_check_result)"
                    f" SELECT {tenant}, 'dom_{px}' || t, 'scale-{px}-' || t || '.example', 'verified', md5(t::text),"
                    f" now() - interval '300 days', now(), 'seeded_for_scale_test'"
                    f" FROM generate_series(1, {p.tenants}) t"),
        ("agent_policies", f"INSERT INTO agent_policies (tenant_id, mode, updated_at)"
                           f" SELECT {tenant}, 'open', now() FROM generate_series(1, {p.tenants}) t"),
        ("agents", f"INSERT INTO agents (tenant_id, client_id, client_name, first_seen_at, last_seen_at)"
                   f" SELECT {tenant}, 'https://agent' || a || '.scale.test/agent.json', 'Scale Agent ' || a,"
                   f" now() - interval '90 days', now() - make_interval(mins => a)"
                   f" FROM generate_series(1, {p.tenants}) t, generate_series(1, {p.agents_per_tenant}) a"),
        ("webhook_endpoints", f"INSERT INTO webhook_endpoints (tenant_id, id, url, event_types, created_at, updated_at)"
                              f" SELECT {tenant}, 'whe_{px}' || lpad(t::text, 8, '0'),"
                              f" 'https://hooks.scale-{px}-' || t || '.example/frontdoor',"
                              f" ARRAY['domain.verified', 'session.signed_in'], now() - interval '300 days', now()"
                              f" FROM generate_series(1, {p.tenants}) t"),
        ("operation_kinds", f"INSERT INTO operation_kinds (tenant_id, name, scopes, default_expiry_seconds,"
                            f" max_expiry_seconds, perform_endpoint_id, created_at, updated_at)"
                            f" SELECT {tenant}, 'order.place', ARRAY['orders:write'], 900, 3600,"
                            f" 'whe_{px}' || lpad(t::text, 8, '0'), now() - interval '300 days', now()"
                            f" FROM generate_series(1, {p.tenants}) t"),
        ("pap_sessions", f"INSERT INTO pap_sessions (tenant_id, id, client_id, user_id, created_at, last_used_at,"
                         f" ended_at, end_reason)"
                         f" SELECT {owner('i')}, 'ses_{px}' || i, {agent}, 'user-' || (i % 997),"
                         f" {when('i', p.sessions)}, {when('i', p.sessions)},"
                         f" CASE WHEN i % 10 = 0 THEN {when('i', p.sessions)} END,"
                         f" CASE WHEN i % 10 = 0 THEN 'agent_blocked' END"
                         f" FROM generate_series(1, {p.sessions}) i"),
        ("operations", f"INSERT INTO operations (id, tenant_id, kind, client_id, user_id, session_id, state, revision,"
                       f" scopes, input, expires_at, confirmed_revision, approved_by, confirmed_at, confirmed_via,"
                       f" result, finished_at, created_at, updated_at)"
                       f" SELECT 'op_{px}' || i, {owner('i')}, 'order.place', {agent}, 'user-' || (i % 997),"
                       f" 'ses_{px}' || (1 + (i - 1) % greatest({p.sessions}, 1)),"
                       f" CASE WHEN i % 20 = 0 THEN 'proposed' WHEN i % 7 = 0 THEN 'failed' ELSE 'succeeded' END, 1,"
                       f" ARRAY['orders:write'], jsonb_build_object('sku', 'SKU-' || (i % 100)),"
                       f" CASE WHEN i % 20 = 0 THEN now() + interval '30 days' ELSE {when('i', p.operations)} END,"
                       f" CASE WHEN i % 20 = 0 THEN NULL ELSE 1 END,"
                       f" CASE WHEN i % 20 = 0 THEN NULL ELSE 'user' END,"
                       f" CASE WHEN i % 20 = 0 THEN NULL ELSE {when('i', p.operations)} END,"
                       f" CASE WHEN i % 20 = 0 THEN NULL ELSE 'agent' END,"
                       f" CASE WHEN i % 20 = 0 THEN NULL ELSE '{{\"status\": \"done\"}}'::jsonb END,"
                       f" CASE WHEN i % 20 = 0 THEN NULL ELSE {when('i', p.operations)} END,"
                       f" {when('i', p.operations)}, {when('i', p.operations)}"
                       f" FROM generate_series(1, {p.operations}) i"),
        ("operation_revisions", f"INSERT INTO operation_revisions (operation_id, tenant_id, revision, summary, terms,"
                                f" user_approval_required, expires_at, created_at)"
                                f" SELECT id, tenant_id, 1, 'Place order ' || id, input, true, expires_at, created_at"
                                f" FROM operations WHERE id LIKE 'op\\_{px}%'"),
        ("webhook_messages", f"INSERT INTO webhook_messages (tenant_id, id, endpoint_id, event_type, body, purpose,"
                             f" state, attempts, created_at, delivered_at, finished_at, last_status)"
                             f" SELECT {owner('i')}, 'msg_{px}' || i, {endpoint}, 'domain.verified',"
                             f" '{{\"type\":\"domain.verified\",\"data\":{{}}}}', 'event',"
                             f" CASE WHEN i % 50 = 0 THEN 'exhausted' ELSE 'delivered' END, 5, {when('i', m)},"
                             f" CASE WHEN i % 50 = 0 THEN NULL ELSE {when('i', m)} END, {when('i', m)},"
                             f" CASE WHEN i % 50 = 0 THEN 500 ELSE 200 END"
                             f" FROM generate_series(1, {m}) i"),
        # attempt i belongs to message 1 + (i - 1) % m: a message's attempts a few seconds apart
        ("webhook_attempts", f"INSERT INTO webhook_attempts (tenant_id, id, message_id, endpoint_id, attempt, url,"
                             f" started_at, duration_ms, response_status, error_class, request_headers)"
                             f" SELECT {owner('(1 + (i - 1) % ' + str(m) + ')')}, 'att_{px}' || i,"
                             f" 'msg_{px}' || (1 + (i - 1) % {m}),"
                             f" 'whe_{px}' || lpad((1 + ((i - 1) % {m}) % {p.tenants})::text, 8, '0'),"
                             f" 1 + (i - 1) / {m}, 'https://hooks.scale.example/frontdoor',"
                             f" {when('(1 + (i - 1) % ' + str(m) + ')', m)} + make_interval(secs => (i - 1) / {m}),"
                             f" 20 + i % 200, CASE WHEN i % 13 = 0 THEN 500 ELSE 200 END,"
                             f" CASE WHEN i % 13 = 0 THEN 'http_status' END, '{{\"content-type\": \"application/json\"}}'"
                             f" FROM generate_series(1, {p.attempts}) i"),
        ("session_events", f"INSERT INTO session_events (tenant_id, id, type, payload, created_at, forwarded_at)"
                           f" SELECT {owner('i')}, 'sev_{px}' || i, 'session.signed_in',"
                           f" jsonb_build_object('session_id', 'ses_{px}' || i), {when('i', p.event_count)},"
                           f" {when('i', p.event_count)} FROM generate_series(1, {p.event_count}) i"),
        ("audit_log", f"INSERT INTO audit_log (tenant_id, id, at, actor_type, action, target_type, target_id)"
                      f" SELECT {tenant}, 'aud_{px}' || t || '_' || a, now() - make_interval(days => a),"
                      f" 'system', 'domain.verified', 'domain', 'scale-{px}-' || t || '.example'"
                      f" FROM generate_series(1, {p.tenants}) t, generate_series(1, {p.audit_per_tenant}) a"),
    ]


async def _signing_keys(conn: asyncpg.Connection, plan: ScalePlan, kek_value: str) -> int:
    """One shared P-256 key, encrypted per tenant with that row's associated data (see the module doc)."""
    from frontdoor_tenancy.credentials.key_encryption import Kek, row_aad
    from frontdoor_tenancy.credentials.signing_key import generate_signing_key

    kek = Kek.from_env_value(kek_value)
    material = generate_signing_key()
    now = datetime.now(UTC)
    ids = [f"ten_{plan.prefix}{t:08d}" for t in range(1, plan.tenants + 1)]
    blobs = [kek.encrypt(material.private_pem, aad=row_aad("signing_key", tenant_id, material.kid)) for tenant_id in ids]
    await conn.execute(
        "INSERT INTO signing_keys (tenant_id, kid, alg, public_jwk, private_key_enc, created_at, activates_at)"
        " SELECT t, $2, 'ES256', $3::jsonb, b, $4, $4 FROM unnest($1::text[], $5::bytea[]) AS u (t, b)",
        ids, material.kid, material.public_jwk, now, blobs)
    return len(ids)


async def seed(conn: asyncpg.Connection, plan: ScalePlan, *, template_tenant_id: str, kek_value: str,
               log: Callable[[str], None] = print) -> dict[str, float]:
    """Write ``plan`` (one transaction per table); return the seconds each table took."""
    import json

    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    try:
        await conn.execute("SET session_replication_role = replica")  # no FK triggers while loading
    except asyncpg.InsufficientPrivilegeError:
        log("  (not a superuser: foreign keys are checked row by row, which is slower)")
    await conn.execute("SET synchronous_commit = off")
    took: dict[str, float] = {}
    statements = _statements(plan)
    for table, sql in statements:
        start = time.perf_counter()
        if table == "domains":  # signing keys first: they are COPYed from here, not generated in SQL
            key_start = time.perf_counter()
            await _signing_keys(conn, plan, kek_value)
            took["signing_keys"] = time.perf_counter() - key_start
            log(f"  signing_keys         {plan.tenants:>10,} rows  {took['signing_keys']:6.1f} s")
            start = time.perf_counter()
        if table == "webhook_attempts":  # monthly partitions for the history (the beat task makes only new ones)
            from frontdoor_webhooks.attempt_partitions import ensure_partitions

            now = datetime.now(UTC)
            await ensure_partitions(conn, now - timedelta(days=plan.days + 1), now)
        status = await conn.execute(sql, template_tenant_id) if "$1" in sql else await conn.execute(sql)
        took[table] = time.perf_counter() - start
        log(f"  {table:<20} {int(status.rsplit(' ', 1)[-1]):>10,} rows  {took[table]:6.1f} s")
    await conn.execute("RESET session_replication_role")
    start = time.perf_counter()
    await conn.execute(f"ANALYZE {', '.join(SEEDED_TABLES)}")
    took["analyze"] = time.perf_counter() - start
    log(f"  ANALYZE                                {took['analyze']:6.1f} s")
    return took


async def sign_up_template(database_url: str, kek_value: str, slug: str = "scale-template") -> str:
    """A real tenant (``tenants.sign_up``) whose settings and admin password hash the seed copies."""
    from frontdoor_core.db import create_pool
    from frontdoor_tenancy import tenants
    from frontdoor_tenancy.credentials.key_encryption import Kek

    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        result = await tenants.sign_up(
            pool, tenants.SignUp(email=f"admin@{slug}.scale.test", password=secrets.token_urlsafe(18),
                                 organization_name="Scale Template", slug=slug),
            kek=Kek.from_env_value(kek_value), now=datetime.now(UTC))
    finally:
        await pool.close()
    return result.tenant.id


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m frontdoor_devstack.scale_seed", description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""), help="default: $DATABASE_URL")
    p.add_argument("--kek", default=os.environ.get("FRONTDOOR_KEK", ""), help="default: $FRONTDOOR_KEK")
    p.add_argument("--tenants", type=int, default=10_000)
    p.add_argument("--sessions", type=int, default=1_000_000)
    p.add_argument("--operations", type=int, default=1_000_000)
    p.add_argument("--attempts", type=int, default=10_000_000, help="webhook delivery attempts")
    p.add_argument("--messages", type=int, default=0, help="webhook messages (default: attempts / 5)")
    p.add_argument("--days", type=int, default=60, help="spread rows over the last DAYS days")
    p.add_argument("--prefix", default="s", help="ID prefix, to seed the same database twice")
    p.add_argument("--template", default="", help="tenant ID to copy settings from (default: sign one up)")
    return p.parse_args(argv)


async def _main(args: argparse.Namespace) -> None:
    if not args.database_url or not args.kek:
        raise SystemExit("DATABASE_URL (or --database-url) and FRONTDOOR_KEK (or --kek) must be set")
    template = args.template or await sign_up_template(args.database_url, args.kek, f"scale-template-{args.prefix}")
    plan = ScalePlan(tenants=args.tenants, sessions=args.sessions, operations=args.operations, attempts=args.attempts,
                     messages=args.messages, days=args.days, prefix=args.prefix)
    conn = await asyncpg.connect(args.database_url)
    try:
        start = time.perf_counter()
        await seed(conn, plan, template_tenant_id=template, kek_value=args.kek)
        print(f"seeded in {time.perf_counter() - start:.1f} s (template tenant {template})")
    finally:
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    asyncio.run(_main(_parse(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
