"""Migrations for every library, the demo tenant and the example company ``make run`` prints.

Dev only. The demo tenant ("Demo Company", slug ``demo``) is configured for Northwind,
the example company on ``:8003``: its APIs, its MCP server, hosted conversations answered by
its concierge (through its webhook endpoint), a resource-server credential, and the domain ``northwind.example`` marked verified without
DNS (a loopback example cannot publish a TXT record; the seed says so in the audit log).

Sign-in is configured on every start (`ensure_sign_in`, idempotent), so a data directory
made before sign-in existed gets it too: Device Sign-In and Direct Sign-In on, each with
``orders:read`` and ``poppy:read``, and the login connection pointing at Northwind's login
page and JWKS.
Northwind's login key and its demo accounts' password are generated once into the data
directory (`northwind_login_secrets`).
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import msgspec
from frontdoor_core.migrations import (
    MIGRATED_PACKAGES,
    apply_migrations,
    discover,
)
from frontdoor_core.settings import Settings

DEMO_SLUG = "demo"
DEMO_EMAIL = "admin@demo.frontdoor.dev"
NORTHWIND_DOMAIN = "northwind.example"
DEVICE_SCOPES = ["orders:read", "poppy:read"]
DIRECT_SCOPES = DEVICE_SCOPES
"""The scopes Device Sign-In and Direct Sign-In offer on the demo tenant (the same)."""
DEMO_ACCOUNTS = ("ada@northwind.example", "grace@northwind.example")
"""Northwind's demo accounts (``northwind.catalog.DEMO_ACCOUNTS``), printed by ``make run``."""


async def apply_all_migrations(database_url: str) -> list[str]:
    """Bring the schema up to date (safe to run concurrently: advisory lock)."""
    conn = await asyncpg.connect(database_url)
    try:
        return await apply_migrations(conn, discover(MIGRATED_PACKAGES))
    finally:
        await conn.close()


def _write_private(path: Path, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)


async def _configure_for_northwind(conn: asyncpg.Connection, tenant_id: str, northwind_url: str) -> str:
    """Point the demo tenant at Northwind; return a new resource-server credential."""
    from frontdoor_sessions import create_credential
    from frontdoor_tenancy import audit, issuer_settings
    from frontdoor_tenancy.actor import Actor
    from frontdoor_tenancy.domain_claims import add_domain, policy_from
    from frontdoor_tenancy.issuer_settings import ApiEntry

    system = Actor(tenant_id=tenant_id, type="system")
    stored = await issuer_settings.get_settings(conn, tenant_id)
    wanted = issuer_settings.validate_settings(
        issuer_settings.IssuerSettings(
            **{**{f: getattr(stored.settings, f) for f in stored.settings.__struct_fields__},
               "organization_name": "Northwind",
               "custom_scopes": {"orders:read": "See your orders"},
               # Frontdoor hosts the conversations; Northwind's concierge answers its webhooks.
               "conversation_endpoint": None,
               "conversations": issuer_settings.HostedConversations(enabled=True),
               "apis": [ApiEntry(type="openapi", url=f"{northwind_url}/openapi.json", description="Orders and products"),
                        ApiEntry(type="mcp", url=f"{northwind_url}/mcp", description="Product search")]}),
        dev=True)
    await issuer_settings.update_settings(conn, tenant_id, wanted)
    now = datetime.now(UTC)
    never = policy_from(pending_window=timedelta(days=7), pending_recheck=timedelta(days=1),
                        recheck=timedelta(days=3650), grace=timedelta(days=3650))
    await add_domain(conn, system, NORTHWIND_DOMAIN, now=now, policy=never)
    await conn.execute(
        "UPDATE domains SET status = 'verified', verified_at = $3, last_seen_at = $3, next_check_at = NULL,"
        " last_check_result = 'seeded_for_development' WHERE tenant_id = $1 AND domain = $2",
        tenant_id, NORTHWIND_DOMAIN, now)
    await audit.record(conn, system, "domain.verified", target_type="domain", target_id=NORTHWIND_DOMAIN,
                       details={"seeded_for_development": True})
    created = await create_credential(conn, system, "northwind (make run)")
    return created.secret


def northwind_login_secrets(data_dir: Path) -> dict[str, Any]:
    """Northwind's login signing key (a private P-256 JWK) and demo password, made once (0600).

    A key that survives restarts keeps the JWKS Frontdoor cached valid; the password is
    random so a forgotten dev stack is not an open door.
    """
    file = data_dir / "northwind-login.json"
    if file.exists():
        saved: dict[str, Any] = json.loads(file.read_text())
        if saved.get("signing_key") and saved.get("demo_password"):
            return saved
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256")
    jwk = {**key.as_dict(private=True), "kid": f"northwind-{key.thumbprint()[:12]}"}
    secrets_ = {"signing_key": jwk, "demo_password": secrets.token_urlsafe(12)}
    _write_private(file, json.dumps(secrets_, indent=2))
    return secrets_


async def ensure_sign_in(settings: Settings, tenant_id: str, northwind_url: str) -> bool:
    """Turn Device and Direct Sign-In on and connect Northwind's login page, unless already so.

    Only what is missing changes: a tenant whose Device (or Direct) Sign-In is on keeps its
    scopes, and a login connection is replaced only when it is unset or points at another
    loopback Northwind (the example port changed). Returns whether the settings were written.
    """
    from frontdoor_tenancy import audit, issuer_settings
    from frontdoor_tenancy.actor import Actor
    from frontdoor_tenancy.issuer_settings import LoginConnection, SignInType

    wanted_login = LoginConnection(url=f"{northwind_url}/login", jwks_uri=f"{northwind_url}/.well-known/jwks.json")
    conn = await asyncpg.connect(settings.database_url)
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        async with conn.transaction():
            stored = await issuer_settings.get_settings(conn, tenant_id)
            current = stored.settings
            changes: dict[str, Any] = {}
            if "orders:read" not in current.custom_scopes:
                changes["custom_scopes"] = {**current.custom_scopes, "orders:read": "See your orders"}
            if not current.device.enabled:
                changes["device"] = SignInType(enabled=True, scopes=list(DEVICE_SCOPES))
            if not current.direct.enabled:
                changes["direct"] = SignInType(enabled=True, scopes=list(DIRECT_SCOPES))
            login = current.login
            if login is None or (login != wanted_login and _is_loopback_northwind(login.url)):
                changes["login"] = wanted_login
            own = current.conversation_endpoint
            if own is not None and _is_loopback_northwind(own, "/poppy/conversations"):
                # Northwind's own endpoint is retired: Frontdoor hosts its conversations now.
                changes["conversation_endpoint"] = None
                changes["conversations"] = msgspec.structs.replace(current.conversations, enabled=True)
            if not changes:
                return False
            updated = issuer_settings.validate_settings(msgspec.structs.replace(current, **changes), dev=True)
            new = await issuer_settings.update_settings(conn, tenant_id, updated, if_version=stored.version)
            await audit.record(conn, Actor(tenant_id=tenant_id, type="system"), "issuer.settings_updated",
                               target_type="tenant", target_id=tenant_id,
                               details={"version": new.version, "seeded_for_development": sorted(changes)})
        return True
    finally:
        await conn.close()


def _is_loopback_northwind(url: str, path: str = "/login") -> bool:
    parts = urlsplit(url)
    return parts.scheme == "http" and parts.hostname in {"127.0.0.1", "localhost"} and parts.path == path


async def seed_demo(settings: Settings, data_dir: Path, *, northwind_url: str) -> dict[str, Any]:
    """Create the demo tenant once; its credentials are kept in the data directory (0600)."""
    from frontdoor_core.db import create_pool
    from frontdoor_core.errors import Conflict
    from frontdoor_tenancy import tenants
    from frontdoor_tenancy.credentials.key_encryption import Kek

    file = data_dir / "demo-credentials.json"
    if file.exists():
        saved: dict[str, Any] = json.loads(file.read_text())
        saved["file"] = str(file)
        return saved
    password = secrets.token_urlsafe(18)
    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        result = await tenants.sign_up(
            pool,
            tenants.SignUp(email=DEMO_EMAIL, password=password, organization_name="Demo Company", slug=DEMO_SLUG),
            kek=Kek.from_env_value(settings.kek),
            now=datetime.now(UTC),
        )
        async with pool.acquire() as conn, conn.transaction():
            credential = await _configure_for_northwind(conn, result.tenant.id, northwind_url)
    except Conflict:
        # The database already has a demo tenant but this data directory has no record of
        # its secrets (e.g. DATABASE_URL points at a shared server): say so, do not reset it.
        return {"slug": DEMO_SLUG, "email": DEMO_EMAIL, "password": "(set on first run)",
                "api_key": "(shown on first run only; create one with POST /api/v1/api-keys)",
                "northwind_credential": "", "file": str(file)}
    finally:
        await pool.close()
    creds = {"slug": DEMO_SLUG, "email": DEMO_EMAIL, "password": password, "api_key": result.api_key.api_key,
             "tenant_id": result.tenant.id, "northwind_credential": credential}
    _write_private(file, json.dumps(creds, indent=2))
    creds["file"] = str(file)
    return creds


CONCIERGE_EVENTS = ("conversation.message.created",)
"""What Northwind's webhook endpoint subscribes to besides the perform webhook."""


async def ensure_operations(settings: Settings, data_dir: Path, tenant_id: str, northwind_url: str) -> str:
    """Northwind's webhook endpoint (perform, and its concierge's ``conversation.message.created``)
    and its ``order.place`` kind (idempotent).

    The endpoint's ``whsec_`` secret is kept in the data directory (0600) for Northwind's
    receiver; answers it.
    """
    from frontdoor_core.db import create_pool
    from frontdoor_operations.kinds import KindInput, get_kind, put_kind
    from frontdoor_tenancy.actor import Actor
    from frontdoor_tenancy.credentials.key_encryption import Kek
    from frontdoor_webhooks.endpoints import create_endpoint, update_endpoint

    file = data_dir / "northwind-webhook.json"
    actor = Actor(tenant_id=tenant_id, type="system")
    pool = await create_pool(settings.database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            saved = json.loads(file.read_text()) if file.exists() else None
            exists = saved is not None and await conn.fetchval(
                "SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2", tenant_id, saved["endpoint_id"])
            if not exists:
                created = await create_endpoint(conn, actor, url=f"{northwind_url}/webhooks/frontdoor",
                                                kek=Kek.from_env_value(settings.kek), now=datetime.now(UTC),
                                                description="Northwind performs orders", allow_insecure=True,
                                                event_types=CONCIERGE_EVENTS)
                saved = {"endpoint_id": created.endpoint.id, "secret": created.secret}
                _write_private(file, json.dumps(saved, indent=2))
            assert saved is not None
            subscribed = await conn.fetchval("SELECT event_types FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2",
                                             tenant_id, saved["endpoint_id"])
            if not set(CONCIERGE_EVENTS) <= set(subscribed or ()):  # a data directory from before the concierge
                await update_endpoint(conn, actor, saved["endpoint_id"], now=datetime.now(UTC),
                                      event_types=sorted({*(subscribed or ()), *CONCIERGE_EVENTS}),
                                      allow_insecure=True)
            if await get_kind(conn, tenant_id, "order.place") is None:
                await put_kind(conn, actor, "order.place", KindInput(
                    perform_endpoint_id=saved["endpoint_id"], scopes=["orders:read"], description="Place an order",
                    default_expiry_seconds=900, max_expiry_seconds=3600), now=datetime.now(UTC))
    finally:
        await pool.close()
    return str(saved["secret"])


async def write_northwind_document(settings: Settings, data_dir: Path, tenant_id: str) -> Path:
    """Generate Northwind's poppy.json from the demo tenant's current settings (every run)."""
    from frontdoor_operations.kinds import has_kinds
    from frontdoor_tenancy.issuer_profile import discovery_document

    conn = await asyncpg.connect(settings.database_url)
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        endpoint = f"{settings.ledger_base_url}/{DEMO_SLUG}/operations" if await has_kinds(conn, tenant_id) else None
        doc = await discovery_document(conn, tenant_id, settings.issuer_base_url, NORTHWIND_DOMAIN, dev=True,
                                       operations_endpoint=endpoint)
    finally:
        await conn.close()
    path = data_dir / "northwind-poppy.json"
    path.write_text(json.dumps(doc, indent=2))
    return path
