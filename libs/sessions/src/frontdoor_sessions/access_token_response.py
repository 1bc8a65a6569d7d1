"""What the PAP 1.0 grants share (ADR 0004 §4, [S §3], [S §5]): which profile a token
request is, what its access token is bound to, and the token response.

- A device-code, authorization-code or refresh request **without** ``session_id`` to a
  tenant serving 1.0 is a 1.0 request; with one it is 0.2, refused (``invalid_request``)
  when the tenant does not serve 0.2 (`token_profile`).
- The access token's audience is the issuer, or the RFC 8707 ``resource`` asked for when
  it is one of the tenant's protected resources (a verified domain's ``https://`` origin,
  or a listed API/MCP URL), else ``invalid_target`` (`bind_access_token`).
- A DPoP proof with the token request binds the token (``cnf.jkt``, ``token_type: DPoP``);
  without one the token is a Bearer token. The proof is checked as at every grant (one
  proof, ``POST`` at the token endpoint, the tenant's nonce), its ``jti`` claimed once.
- Sign-in for 1.0 needs the agent's document to declare ``private_key_jwt`` and
  ``redirect_uris`` [S §3] (`require_sign_in_metadata`).
- The response is an RFC 9068 access token (15 minutes, ``sgn`` = the sign-in), the
  refresh token (an Account Token) when one was issued, and ``scope``; never
  ``session_id`` nor ``signed_in`` (`access_token_response`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import asyncpg
from frontdoor_identity import ClientMetadata, record_seen
from frontdoor_protocol.access_token import ACCESS_TOKEN_LIFETIME, AccessTokenClaims, mint_access_token
from frontdoor_protocol.errors import ProtocolError
from frontdoor_protocol.protected_resource_metadata import domain_resource
from frontdoor_protocol.session_token import Confirmation
from frontdoor_tenancy import domain_claims

from .dpop_nonce import NonceSource
from .signer_cache import IssuerKeys
from .token_binding import check_token_proof
from .token_endpoint import GrantDeps, GrantOutcome, OneTimeValue, TenantIssuer
from .token_request import TokenRequest

__all__ = [
    "AccessBinding",
    "access_token_response",
    "bind_access_token",
    "protected_resources",
    "record_agent_seen",
    "require_sign_in_metadata",
    "token_profile",
]

Profile = Literal["0.2", "1.0"]


def token_profile(tenant: TenantIssuer, req: TokenRequest) -> Profile:
    """The profile of a sign-in or refresh request (ADR 0004 §4).

    Raises:
        ProtocolError: ``invalid_request`` for a ``session_id`` to a tenant that does not serve 0.2.
    """
    served = tenant.settings.protocol
    if req.session_id is None and served.serves("1.0"):
        return "1.0"
    if req.session_id is not None and not served.serves("0.2"):
        raise ProtocolError("invalid_request", "session_id is not accepted here: this issuer does not serve PAP 0.2.")
    return "0.2"


def require_sign_in_metadata(metadata: ClientMetadata) -> None:
    """A 1.0 sign-in needs ``private_key_jwt`` declared and ``redirect_uris`` in the agent's document [S §3].

    Raises:
        ProtocolError: ``unauthorized_client``.
    """
    redirects = metadata.redirect_uris + metadata.loopback_redirect_uris
    if not redirects or not metadata.auth_method_declared or metadata.token_endpoint_auth_method != "private_key_jwt":
        raise ProtocolError("unauthorized_client",
                            "Signing in needs token_endpoint_auth_method private_key_jwt and redirect_uris "
                            "in the agent's metadata.")


async def protected_resources(conn: asyncpg.Connection, tenant: TenantIssuer) -> list[str]:
    """The tenant's protected resources: every verified domain's origin and the listed APIs."""
    out = []
    for domain in await domain_claims.listed_domains(conn, tenant.tenant_id):
        try:
            out.append(domain_resource(domain))
        except ValueError:
            continue
    out.extend(a.url for a in tenant.settings.apis)
    return out


@dataclass(frozen=True, slots=True)
class AccessBinding:
    """The audience and key of a 1.0 access token.

    Attributes:
        audience: The issuer, or the protected resource asked for.
        jkt: The DPoP key thumbprint (``cnf.jkt``), None for a Bearer token.
        one_time: The proof's ``jti`` to claim, None without a proof.
        headers: Headers for the response (a fresh ``DPoP-Nonce``).
    """

    audience: str
    jkt: str | None
    one_time: OneTimeValue | None
    headers: dict[str, str] = field(default_factory=dict)


def bind_access_token(nonces: NonceSource, tenant: TenantIssuer, req: TokenRequest, *, now: int,
                      resources: list[str] | None) -> AccessBinding:
    """Check ``resource`` (RFC 8707) and the optional DPoP proof of a 1.0 token request.

    Args:
        resources: The tenant's protected resources (`protected_resources`); only read
            when ``resource`` was sent.

    Raises:
        ProtocolError: ``invalid_target``, ``invalid_dpop_proof``.
        GrantRefused: ``use_dpop_nonce`` with the ``DPoP-Nonce`` to use.
    """
    audience = tenant.issuer
    if req.resource is not None:
        if req.resource not in (resources or []):
            raise ProtocolError("invalid_target", "The resource is not one of this company's protected resources.")
        audience = req.resource
    if not req.dpop:
        return AccessBinding(audience=audience, jkt=None, one_time=None)
    proof = check_token_proof(nonces, tenant, req.dpop, now=now)
    return AccessBinding(audience=audience, jkt=proof.jkt, one_time=proof.one_time, headers=proof.headers)


async def access_token_response(conn: asyncpg.Connection, keys: IssuerKeys, tenant: TenantIssuer,
                                binding: AccessBinding, *, client_id: str, account_id: str, scope: str,
                                sign_in_id: str, now: datetime, refresh_token: str | None = None) -> GrantOutcome:
    """Mint the RFC 9068 access token of a 1.0 sign-in and build the token response."""
    epoch = int(now.timestamp())
    signer = await keys.signer(conn, tenant.tenant_id, now)
    claims = AccessTokenClaims(
        iss=tenant.issuer, sub=account_id, aud=binding.audience, client_id=client_id, scope=scope,
        jti=secrets.token_urlsafe(16), iat=epoch, exp=epoch + ACCESS_TOKEN_LIFETIME, sgn=sign_in_id,
        cnf=Confirmation(jkt=binding.jkt) if binding.jkt else None,
    )
    body: dict[str, Any] = {
        "access_token": mint_access_token(claims, signer.key, signer.kid),
        "token_type": "DPoP" if binding.jkt else "Bearer",
        "expires_in": ACCESS_TOKEN_LIFETIME,
        "scope": scope,
    }
    if refresh_token is not None:
        body["refresh_token"] = refresh_token
    return GrantOutcome(body=body, headers=dict(binding.headers))


async def record_agent_seen(deps: GrantDeps, conn: asyncpg.Connection, tenant: TenantIssuer, auth: Any, *,
                            now: datetime) -> None:
    """List a 1.0 agent among the tenant's agents (the dashboard), as the 0.2 Session grant does."""
    if deps.seen.due((tenant.tenant_id, auth.client_id)):
        metadata = auth.client.metadata
        await record_seen(conn, tenant.tenant_id, auth.client_id, name=metadata.client_name,
                          logo=metadata.logo_uri, now=now)
