"""``make run OIDC=1``: a second demo tenant whose users sign in at a local OpenID Provider.

Dev only, off unless ``FRONTDOOR_DEMO_OIDC`` is set (``make run OIDC=1``); without it
`make run` does exactly what it did. With it:

- **the IdP**: panva's npm ``oidc-provider`` (OpenID Certified), run by the same
  ``tests/support/oidc/idp.mjs`` the tests start, on a free loopback port (the one of the
  last run when it is still free, so the issuer identifier Frontdoor cached stays the same).
  Its signing key, Frontdoor's client secret and the demo users' password are made once into
  ``.data/oidc-idp.json`` (0600). Its users are `IDP_USERS` (``ada`` and ``grace``), each
  signing in with that password at the IdP's own login page; the IdP keeps its sessions and
  grants in memory, so a restart signs them out there.
- **the tenant** ``demo-oidc`` ("Acme"): created once (its admin credentials kept in
  ``.data/demo-oidc-credentials.json``, 0600), Device and Direct Sign-In on for ``poppy:read``,
  its login connection ``oidc`` to that IdP (``client_secret_basic``, ``account_claim: sub``,
  Back-Channel Logout on: the IdP posts its logout tokens to the issuer's
  ``/demo-oidc/oidc/backchannel-logout``). Checked on every start, so a moved port is followed.

Why the IdP is run from ``tests/support/oidc``: it is a development tool for a repository
checkout, like the rest of ``make run`` (Northwind comes from ``examples/``); one pinned
``oidc-provider``, one lockfile and one ``npm ci`` serve the tests and the demo, where a copy
under ``tools/`` would be a second lockfile to keep in step. Only this switch needs it (and
Node.js); ``make run`` without it never touches ``tests/``.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
from frontdoor_core.settings import Settings

OIDC_ENV = "FRONTDOOR_DEMO_OIDC"
OIDC_SLUG = "demo-oidc"
OIDC_EMAIL = "admin@demo-oidc.frontdoor.dev"
OIDC_ORGANIZATION = "Acme"
OIDC_CLIENT_ID = "frontdoor-demo-oidc"
OIDC_SCOPES = ["poppy:read"]
IDP_USERS = ("ada", "grace")
"""The IdP's demo users; each is the account ID (``sub``) Frontdoor's sdk would see."""
IDP_DIR = Path(__file__).resolve().parents[4] / "tests" / "support" / "oidc"
IDP_SCRIPT = IDP_DIR / "idp.mjs"

_ON = {"1", "true", "yes", "on"}
_OFF = {"", "0", "false", "no", "off"}


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether ``FRONTDOOR_DEMO_OIDC`` asks for the OIDC demo (unset: no); a value not yes/no is refused."""
    raw = environ.get(OIDC_ENV, "").strip().lower()
    if raw in _ON:
        return True
    if raw in _OFF:
        return False
    raise ValueError(f"{OIDC_ENV} must be 1 or 0 (got {environ.get(OIDC_ENV)!r})")


def _write_private(path: Path, data: str) -> None:
    from .seed import _write_private as write

    write(path, data)


def idp_secrets(data_dir: Path) -> dict[str, Any]:
    """The IdP's RS256 signing key (a private JWK), Frontdoor's client secret and the users'
    password, made once into ``oidc-idp.json`` (0600); ``port`` is the last run's."""
    file = data_dir / "oidc-idp.json"
    if file.exists():
        saved: dict[str, Any] = json.loads(file.read_text())
        if saved.get("signing_key") and saved.get("client_secret") and saved.get("password"):
            return saved
    import secrets

    from joserfc.jwk import RSAKey

    key = RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256"})
    made = {"signing_key": {**key.as_dict(private=True), "kid": f"demo-idp-{key.thumbprint()[:12]}"},
            "client_secret": secrets.token_urlsafe(32), "password": secrets.token_urlsafe(12), "port": 0}
    _write_private(file, json.dumps(made, indent=2))
    return made


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_port(saved: int) -> int:
    """The last run's port when it is still free (the issuer identifier stays), else any free one."""
    if saved and _bindable(saved):
        return saved
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def remember_port(data_dir: Path, secrets_: dict[str, Any], port: int) -> None:
    if secrets_.get("port") != port:
        secrets_["port"] = port
        _write_private(data_dir / "oidc-idp.json", json.dumps(secrets_, indent=2))


@dataclass(frozen=True)
class LocalIdp:
    """How to start the IdP and what Frontdoor's connection to it is."""

    issuer: str
    argv: list[str]
    env: dict[str, str]
    client_secret: str
    password: str


def local_idp(issuer_base_url: str, secrets_: dict[str, Any], port: int, *, slug: str = OIDC_SLUG) -> LocalIdp:
    """The IdP's command line and environment: one client, Frontdoor's ``slug`` tenant (``demo-oidc``).

    Raises:
        SystemExit: Node.js is not installed, or ``npm ci`` of the pinned provider failed.
    """
    node = shutil.which("node")
    if node is None:
        raise SystemExit(f"{OIDC_ENV} needs Node.js and npm for the local OpenID Provider: apt-get install nodejs npm")
    ensure_installed()
    tenant_issuer = f"{issuer_base_url.rstrip('/')}/{slug}"
    client = {"client_id": OIDC_CLIENT_ID, "client_secret": secrets_["client_secret"],
              "token_endpoint_auth_method": "client_secret_basic",
              "redirect_uris": [f"{tenant_issuer}/oidc/callback"], "grant_types": ["authorization_code"],
              "response_types": ["code"], "backchannel_logout_uri": f"{tenant_issuer}/oidc/backchannel-logout",
              "backchannel_logout_session_required": True}
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "IDP_PORT": str(port),
           "IDP_JWKS": json.dumps({"keys": [secrets_["signing_key"]]}), "IDP_CLIENTS": json.dumps([client]),
           "IDP_USERS": json.dumps(dict.fromkeys(IDP_USERS, secrets_["password"]))}
    return LocalIdp(issuer=f"http://127.0.0.1:{port}", argv=[node, str(IDP_SCRIPT)], env=env,
                    client_secret=str(secrets_["client_secret"]), password=str(secrets_["password"]))


def ensure_installed() -> None:
    """``npm ci`` the pinned ``oidc-provider`` when ``node_modules`` is missing (the first run)."""
    if (IDP_DIR / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(f"{OIDC_ENV} needs npm to install oidc-provider: apt-get install npm")
    print(f"Installing oidc-provider (npm ci in {IDP_DIR})...", flush=True)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=IDP_DIR, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"npm ci failed in {IDP_DIR}:\n{done.stdout}{done.stderr}")


async def seed_oidc_tenant(settings: Settings, data_dir: Path, *, slug: str = OIDC_SLUG) -> dict[str, Any]:
    """Create the ``slug`` tenant (``demo-oidc``) once; its admin credentials are kept in the data directory (0600)."""
    import secrets

    from frontdoor_core.db import create_pool
    from frontdoor_core.errors import Conflict
    from frontdoor_tenancy import tenants
    from frontdoor_tenancy.credentials.key_encryption import Kek

    file = data_dir / "demo-oidc-credentials.json"
    if file.exists():
        saved: dict[str, Any] = json.loads(file.read_text())
        saved["file"] = str(file)
        return saved
    password = secrets.token_urlsafe(18)
    email = OIDC_EMAIL if slug == OIDC_SLUG else f"admin@{slug}.frontdoor.dev"
    pool = await create_pool(settings.database_url, min_size=1, max_size=1)
    try:
        result = await tenants.sign_up(
            pool, tenants.SignUp(email=email, password=password, organization_name=OIDC_ORGANIZATION, slug=slug),
            kek=Kek.from_env_value(settings.kek), now=datetime.now(UTC))
    except Conflict:
        # The database has the tenant, this data directory no record of it (a shared DATABASE_URL).
        async with pool.acquire() as conn:
            tenant_id = await conn.fetchval("SELECT id FROM tenants WHERE slug = $1", slug)
        return {"slug": slug, "email": email, "password": "(set on first run)",
                "api_key": "(shown on first run only)", "tenant_id": tenant_id or "", "file": str(file)}
    finally:
        await pool.close()
    creds = {"slug": slug, "email": email, "password": password, "api_key": result.api_key.api_key,
             "tenant_id": result.tenant.id}
    _write_private(file, json.dumps(creds, indent=2))
    creds["file"] = str(file)
    return creds


async def ensure_oidc_login(settings: Settings, tenant_id: str, idp: LocalIdp) -> bool:
    """Device and Direct Sign-In on and the login connection ``oidc`` to ``idp``, unless already so.

    The client secret is stored KEK-encrypted as the dashboard stores it; it is written again
    with the connection (the connection changes when the IdP's port moved). Returns whether
    the settings were written; each write is audited ``seeded_for_development``.
    """
    from frontdoor_tenancy import audit, issuer_settings, oidc_connection
    from frontdoor_tenancy.actor import Actor
    from frontdoor_tenancy.credentials.key_encryption import Kek
    from frontdoor_tenancy.issuer_settings import LoginConnection, SignInType

    wanted_login = LoginConnection(type="oidc", issuer=idp.issuer, client_id=OIDC_CLIENT_ID,
                                   token_endpoint_auth_method="client_secret_basic", account_claim="sub",
                                   backchannel_logout=True)
    conn = await asyncpg.connect(settings.database_url)
    try:
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        async with conn.transaction():
            stored = await issuer_settings.get_settings(conn, tenant_id)
            current = stored.settings
            changes: dict[str, Any] = {}
            if current.organization_name != OIDC_ORGANIZATION:
                changes["organization_name"] = OIDC_ORGANIZATION
            if not current.device.enabled:
                changes["device"] = SignInType(enabled=True, scopes=list(OIDC_SCOPES))
            if not current.direct.enabled:
                changes["direct"] = SignInType(enabled=True, scopes=list(OIDC_SCOPES))
            secret_set = await oidc_connection.has_client_secret(conn, tenant_id)
            if current.login != wanted_login or not secret_set:
                changes["login"] = msgspec.structs.replace(wanted_login, client_secret=idp.client_secret)
            if not changes:
                return False
            updated = issuer_settings.validate_settings(msgspec.structs.replace(current, **changes), dev=True)
            updated, secret = await oidc_connection.store_login_secret(
                conn, Kek.from_env_value(settings.kek), tenant_id, updated, now=datetime.now(UTC))
            new = await issuer_settings.update_settings(conn, tenant_id, updated, if_version=stored.version)
            await audit.record(conn, Actor(tenant_id=tenant_id, type="system"), "issuer.settings_updated",
                               target_type="tenant", target_id=tenant_id,
                               details={"version": new.version, "login_type": "oidc", "login_client_secret": secret,
                                        "seeded_for_development": sorted(changes)})
        return True
    finally:
        await conn.close()


def banner_lines(settings: Any, creds: dict[str, Any], idp: LocalIdp) -> list[str]:
    """What the banner says about the second demo tenant (its URLs, admin and IdP users)."""
    slug = creds["slug"]
    issuer = f"{settings.issuer_base_url}/{slug}"
    return [
        f"Second demo tenant ({OIDC_ENV}): {OIDC_ORGANIZATION}, users sign in at a local OpenID Provider:",
        f"  issuer metadata  {settings.issuer_base_url}/.well-known/oauth-authorization-server/{slug}",
        f"  device page      {issuer}/device   (Device Sign-In; Direct: {issuer}/oauth/authorize)",
        f"  OpenID Provider  {idp.issuer}   (oidc-provider; {idp.issuer}/.well-known/openid-configuration)",
        f"  admin email      {creds['email']}",
        f"  admin password   {creds['password']}",
        f"  API key          {creds['api_key']}",
        f"  (kept in {creds['file']})",
        *(f"  IdP user {user:<8} password {idp.password}   (account ID \"{user}\")" for user in IDP_USERS),
        "",
    ]
