"""``GET/PUT /api/v1/issuer``, the tenant, and signing-key rotation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from frontdoor_conversations.relay import check_relay_endpoint
from frontdoor_core.db import transaction
from frontdoor_core.errors import Invalid
from frontdoor_tenancy import audit, issuer_settings, oidc_connection, signing_keys, tenants
from frontdoor_tenancy.actor import Actor
from frontdoor_tenancy.issuer_settings import IssuerSettings
from litestar import get, patch, post, put
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import JSONBody, Parameter

from .deps import ctx_of, require_writer
from .problems import PROBLEMS

__all__ = ["get_issuer", "get_tenant", "list_signing_keys", "patch_tenant", "put_issuer", "rotate_key"]


class IssuerOut(msgspec.Struct, frozen=True, kw_only=True):
    issuer: str
    metadata_url: str
    jwks_uri: str
    version: int
    updated_at: datetime
    settings: IssuerSettings
    # The oidc login connection's client secret is write-only: only whether one is stored.
    login_client_secret_set: bool = False


@get("/api/v1/issuer", responses=PROBLEMS, tags=["issuer"], summary="Read the issuer settings")
async def get_issuer(actor: NamedDependency[Actor], state: State) -> IssuerOut:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        tenant = await tenants.get_tenant(conn, actor.tenant_id)
        stored = await issuer_settings.get_settings(conn, actor.tenant_id)
        secret_set = await oidc_connection.has_client_secret(conn, actor.tenant_id)
    return _out(ctx, tenant.slug, stored, secret_set=secret_set)


def _out(ctx: Any, slug: str, stored: issuer_settings.StoredIssuerSettings, *, secret_set: bool) -> IssuerOut:
    base = ctx.settings.issuer_base_url
    return IssuerOut(
        issuer=ctx.issuer_url(slug),
        metadata_url=f"{base}/.well-known/oauth-authorization-server/{slug}",
        jwks_uri=f"{ctx.issuer_url(slug)}/jwks.json",
        version=stored.version, updated_at=stored.updated_at, settings=stored.settings,
        login_client_secret_set=secret_set,
    )


@put("/api/v1/issuer", responses=PROBLEMS, tags=["issuer"], summary="Replace the issuer settings",
     description="Send `If-Match: <version>` to refuse the write if someone changed the settings meanwhile. "
                "`login.client_secret` (an `oidc` connection) is write-only: stored KEK-encrypted, read back as "
                "null (`login_client_secret_set` says whether one is stored); omit it to keep the stored one.")
async def put_issuer(
    data: JSONBody[IssuerSettings], actor: NamedDependency[Actor], state: State,
    if_match: str | None = Parameter(header="If-Match", default=None, max_length=20),
) -> IssuerOut:
    require_writer(actor)
    ctx = ctx_of(state)
    clean = issuer_settings.validate_settings(data, dev=ctx.settings.is_dev)
    version = _if_match_version(if_match)
    async with transaction(ctx.pool) as conn:
        tenant = await tenants.get_tenant(conn, actor.tenant_id)
        # The relay mode's endpoint: this organisation's, at a URL the webhook rules accept now.
        await check_relay_endpoint(conn, actor.tenant_id, clean.conversations.relay_endpoint_id,
                                   allow_insecure=ctx.settings.is_dev,
                                   allowlist=ctx.settings.webhook_allowlist_entries())
        clean, secret = await oidc_connection.store_login_secret(conn, ctx.kek, actor.tenant_id, clean, now=ctx.now())
        stored = await issuer_settings.update_settings(conn, actor.tenant_id, clean, if_version=version)
        await audit.record(conn, actor, "issuer.settings_updated", target_type="tenant", target_id=actor.tenant_id,
                           details={"version": stored.version, "login_type": clean.login.type if clean.login else None,
                                    "login_client_secret": secret})
    return _out(ctx, tenant.slug, stored, secret_set=clean.login is not None and clean.login.type == "oidc")


def _if_match_version(header: str | None) -> int | None:
    """``If-Match: 3``, ``"3"`` or ``W/"3"`` → 3; absent or ``*`` → None (unconditional)."""
    if header is None or header.strip() == "*":
        return None
    value = header.strip().removeprefix("W/").strip('"')
    if not value.isdigit():
        raise Invalid("invalid_if_match", "If-Match must be the settings version, e.g. If-Match: 3.",
                      fields={"If-Match": "not a version"})
    return int(value)


class TenantOut(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    slug: str
    organization_name: str
    issuer: str
    created_at: datetime


class TenantPatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    slug: str | None = None


@get("/api/v1/tenant", responses=PROBLEMS, tags=["tenants"], summary="Read your tenant")
async def get_tenant(actor: NamedDependency[Actor], state: State) -> TenantOut:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        t = await tenants.get_tenant(conn, actor.tenant_id)
    return TenantOut(id=t.id, slug=t.slug, organization_name=t.organization_name, issuer=ctx.issuer_url(t.slug),
                     created_at=t.created_at)


@patch("/api/v1/tenant", tags=["tenants"], summary="Change the slug (only before any domain is verified)",
       responses=PROBLEMS)
async def patch_tenant(data: JSONBody[TenantPatch], actor: NamedDependency[Actor], state: State) -> TenantOut:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        t = await tenants.change_slug(conn, actor, data.slug) if data.slug is not None else await tenants.get_tenant(
            conn, actor.tenant_id)
    return TenantOut(id=t.id, slug=t.slug, organization_name=t.organization_name, issuer=ctx.issuer_url(t.slug),
                     created_at=t.created_at)


class RotationOut(msgspec.Struct, frozen=True, kw_only=True):
    kid: str
    activates_at: datetime


class SigningKeyList(msgspec.Struct, frozen=True, kw_only=True):
    keys: list[dict[str, Any]]


@post("/api/v1/signing-keys/rotate", status_code=201, tags=["issuer"], summary="Rotate the issuer signing key",
      responses=PROBLEMS,
      description="The new key is published now and signs after the configured lead time. With "
                  "`?compromised=true` (the old key leaked) it signs at once and every other key leaves the "
                  "JWKS immediately: tokens they signed stop verifying.")
async def rotate_key(actor: NamedDependency[Actor], state: State,
                     compromised: bool = Parameter(default=False)) -> RotationOut:
    require_writer(actor)
    ctx = ctx_of(state)
    async with transaction(ctx.pool) as conn:
        kid, at = await signing_keys.rotate_signing_key(
            conn, actor.tenant_id, ctx.kek, ctx.now(), publish_lead=ctx.settings.key_publish_lead,
            compromised=compromised)
        await audit.record(conn, actor, "signing_key.rotated", target_type="signing_key", target_id=kid,
                           details={"activates_at": at.isoformat(), "compromised": compromised})
    return RotationOut(kid=kid, activates_at=at)


@get("/api/v1/signing-keys", tags=["issuer"], summary="The published public keys (the issuer's JWKS)",
     responses=PROBLEMS)
async def list_signing_keys(actor: NamedDependency[Actor], state: State) -> SigningKeyList:
    ctx = ctx_of(state)
    async with ctx.pool.acquire() as conn:
        doc = await signing_keys.jwks(conn, actor.tenant_id, ctx.now())
    return SigningKeyList(keys=doc["keys"])
