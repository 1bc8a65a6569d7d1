"""A tenant's public face: its issuer URLs, RFC 8414 metadata and generated ``poppy.json``.

Everything here is derived, never stored: the slug fixes the issuer identifier, the
issuer settings choose what is enabled, and the verified domains fill ``poppy_domains``.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec
from frontdoor_core.errors import Conflict, NotFound
from frontdoor_protocol.authorization_server_metadata import GrantType, build_metadata
from frontdoor_protocol.discovery_builder import DiscoveryInputs, InvalidDiscoveryInputs, build_discovery_document
from frontdoor_protocol.discovery_document import ApiListing, Auth, MediatedField, MediatedSignIn, SignInOffer
from frontdoor_protocol.profile import profile_for
from frontdoor_protocol.protected_resource_metadata import build_protected_resource_metadata, domain_resource

from . import domain_claims, issuer_settings, tenants
from .issuer_settings import IssuerSettings

__all__ = [
    "IssuerUrls",
    "discovery_document",
    "expected_auth",
    "issuer_metadata",
    "issuer_urls",
    "metadata_for_slug",
    "protected_resource_document",
]


class IssuerUrls(msgspec.Struct, frozen=True, kw_only=True):
    """The endpoints of one tenant's issuer (all under the issuer path)."""

    issuer: str
    metadata: str
    jwks_uri: str
    token_endpoint: str
    revocation_endpoint: str
    authorization_endpoint: str
    device_authorization_endpoint: str
    introspection_endpoint: str
    feedback_endpoint: str
    mediated_endpoint: str
    join_endpoint: str


def issuer_urls(base_url: str, slug: str) -> IssuerUrls:
    """URLs for ``slug`` under ``base_url`` (RFC 8414 §3.1 path-inserted metadata)."""
    issuer = f"{base_url}/{slug}"
    return IssuerUrls(
        issuer=issuer,
        metadata=f"{base_url}/.well-known/oauth-authorization-server/{slug}",
        jwks_uri=f"{issuer}/jwks.json",
        token_endpoint=f"{issuer}/oauth/token",
        revocation_endpoint=f"{issuer}/oauth/revoke",
        authorization_endpoint=f"{issuer}/oauth/authorize",
        device_authorization_endpoint=f"{issuer}/oauth/device",
        introspection_endpoint=f"{issuer}/oauth/introspect",
        feedback_endpoint=f"{issuer}/feedback",
        mediated_endpoint=f"{issuer}/oauth/mediated",
        join_endpoint=f"{issuer}/join",
    )


def issuer_metadata(urls: IssuerUrls, settings: IssuerSettings, domains: list[str], *, dev: bool = False) -> dict[str, Any]:
    """The RFC 8414 document with ``poppy_domains`` (PAP §3.2), following ``protocol.served``.

    ``poppy_domains`` and the jwt-bearer Session grant while 0.2 is served;
    ``protected_resources`` (every verified domain's origin and the listed APIs) while 1.0
    is; ``refresh_token`` always (ADR 0004 §1, [S §2]).
    """
    served = settings.protocol.served
    grants = [GrantType.JWT_BEARER] if "0.2" in served else []
    signs_in = settings.direct.enabled or settings.device.enabled or settings.mediated.enabled
    if "1.0" in served or signs_in:  # 0.2 alone: Account Tokens exist only after a sign-in
        grants.append(GrantType.REFRESH_TOKEN)
    if settings.direct.enabled:
        grants.append(GrantType.AUTHORIZATION_CODE)
    if settings.device.enabled:
        grants.append(GrantType.DEVICE_CODE)
    scopes = settings.enabled_scopes()
    return build_metadata(
        issuer=urls.issuer,
        domains=domains,
        jwks_uri=urls.jwks_uri,
        token_endpoint=urls.token_endpoint,
        revocation_endpoint=urls.revocation_endpoint,
        scopes=scopes,
        grant_types=grants,
        authorization_endpoint=urls.authorization_endpoint if settings.direct.enabled else None,
        device_authorization_endpoint=urls.device_authorization_endpoint if settings.device.enabled else None,
        allow_http_loopback=dev,
        served=served,
        resources=[a.url for a in settings.apis] if "1.0" in served else (),
    )


async def metadata_for_slug(conn: asyncpg.Connection, base_url: str, slug: str, *, dev: bool = False
                            ) -> dict[str, Any] | None:
    """The metadata of the issuer at ``slug``, or None when no tenant has that slug."""
    tenant = await tenants.tenant_by_slug(conn, slug)
    if tenant is None:
        return None
    stored = await issuer_settings.get_settings(conn, tenant.id)
    domains = await domain_claims.listed_domains(conn, tenant.id)
    return issuer_metadata(issuer_urls(base_url, slug), stored.settings, domains, dev=dev)


def expected_auth(urls: IssuerUrls, s: IssuerSettings) -> Auth:
    """The ``auth`` object every domain of the tenant publishes (PAP-3.2-06)."""
    used = set(s.enabled_scopes())
    custom = {k: v for k, v in s.custom_scopes.items() if k in used}
    return Auth(
        issuer=urls.issuer,
        direct=SignInOffer(scopes=tuple(s.direct.scopes)) if s.direct.enabled else None,
        device=SignInOffer(scopes=tuple(s.device.scopes)) if s.device.enabled else None,
        mediated=MediatedSignIn(
            endpoint=urls.mediated_endpoint,
            fields=tuple(MediatedField(name=f.name, label=f.label, secret=f.secret) for f in s.mediated.fields),
            scopes=tuple(s.mediated.scopes),
        ) if s.mediated.enabled else None,
        custom_scopes=custom or None,
    )


async def discovery_document(conn: asyncpg.Connection, tenant_id: str, base_url: str, raw_domain: str, *,
                             dev: bool = False, operations_endpoint: str | None = None,
                             ledger_base_url: str | None = None) -> dict[str, Any]:
    """The ``poppy.json`` the company publishes on a verified domain (profile 0.2).

    ``operations_endpoint`` lists the Operations extension (``extensions.operations``) when
    the tenant has operation kinds: agents confirm there, at Frontdoor's ledger.
    ``ledger_base_url`` places the hosted conversation endpoint (``{ledger}/{slug}/conversations``)
    in ``agent.protocols`` when the tenant enabled ``conversations`` (PAP §7).

    Raises:
        NotFound: no such domain on this tenant.
        Conflict: the domain is not verified yet, or the settings cannot make a valid document.
    """
    view = await domain_claims.get_domain(conn, tenant_id, raw_domain)
    if view.status != "verified":
        raise Conflict("domain_not_verified",
                       "Verify the domain first: publish its TXT record, then POST .../verify.")
    tenant = await tenants.get_tenant(conn, tenant_id)
    stored = await issuer_settings.get_settings(conn, tenant_id)
    urls = issuer_urls(base_url, tenant.slug)
    s = stored.settings
    try:
        return build_discovery_document(DiscoveryInputs(
            organization_name=s.organization_name or tenant.organization_name,
            domain=view.domain,
            auth=expected_auth(urls, s),
            apis=tuple(ApiListing(type=a.type, url=a.url, description=a.description) for a in s.apis),
            website=s.website,
            conversation_endpoint=(f"{ledger_base_url}/{tenant.slug}/conversations"
                                   if s.conversations.enabled and ledger_base_url else s.conversation_endpoint),
            browser_session_endpoint=_browser_session_endpoint(urls, s),
            feedback_endpoint=urls.feedback_endpoint if profile_for(s.protocol.published).feedback_endpoint else None,
            operations_endpoint=operations_endpoint,
            protocol_version=s.protocol.published,
            allow_http_loopback=dev,
        ))
    except InvalidDiscoveryInputs as exc:
        raise Conflict("invalid_discovery_document", "Your issuer settings cannot make a valid poppy.json.",
                       fields={f.pointer or "/": f.message for f in exc.findings}) from None


def _browser_session_endpoint(urls: IssuerUrls, s: IssuerSettings) -> str | None:
    """``web.browser_session_endpoint``: the company's own (0.2, PAP §5) or Frontdoor's hosted join (1.0).

    A 1.0 document advertises ``{issuer}/join`` only when the three steps can run, which
    needs the company's join callback (``protocol.join_callback_url``) [S §6], ADR 0004 §8.
    """
    if s.protocol.published == "1.0":
        return urls.join_endpoint if s.protocol.join_callback_url is not None else None
    return s.browser_session_endpoint


async def protected_resource_document(conn: asyncpg.Connection, tenant_id: str, base_url: str, raw_domain: str, *,
                                      dev: bool = False) -> dict[str, Any]:
    """The RFC 9728 metadata the company publishes at ``https://{domain}/.well-known/oauth-protected-resource``.

    Only while the tenant serves 1.0 ([S §2]): ``resource`` is the domain's origin,
    ``authorization_servers`` the tenant's issuer, ``scopes_supported`` what the enabled
    sign-in types grant.

    Raises:
        NotFound: no such domain on this tenant.
        Conflict: the domain is not verified yet, or the tenant does not serve 1.0.
    """
    view = await domain_claims.get_domain(conn, tenant_id, raw_domain)
    if view.status != "verified":
        raise Conflict("domain_not_verified",
                       "Verify the domain first: publish its TXT record, then POST .../verify.")
    stored = await issuer_settings.get_settings(conn, tenant_id)
    if not stored.settings.protocol.serves("1.0"):
        raise Conflict("profile_not_served", "Protected-resource metadata is published while the issuer serves 1.0.")
    tenant = await tenants.get_tenant(conn, tenant_id)
    urls = issuer_urls(base_url, tenant.slug)
    return build_protected_resource_metadata(
        resource=domain_resource(view.domain), authorization_servers=[urls.issuer],
        scopes_supported=stored.settings.enabled_scopes() or None,
        resource_name=stored.settings.organization_name or tenant.organization_name, allow_http_loopback=dev,
    )


_ = NotFound
